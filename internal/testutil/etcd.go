package testutil

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Etcd is a real single-member etcd on 127.0.0.1, private to one test:
// its own client and peer ports, its own data directory. It is stopped
// when the test ends, thawed first if the test left it frozen. Restart
// keeps the data directory and the ports, as a member that comes back
// does.
//
// The methods are safe for concurrent use.
type Etcd struct {
	// Endpoint is host:port of the client URL; it stays the same across
	// Restart.
	Endpoint string
	// URL is the client URL, http:// or https://.
	URL string

	serverProcess

	bin      string
	dir      string
	peerURL  string
	certFile string
	keyFile  string
}

// etcdStartWait bounds how long a started member may take to answer
// /health: a single member elects itself within about a second.
const etcdStartWait = 20 * time.Second

// StartEtcd starts an etcd member on free loopback ports and waits until
// it is healthy. A missing etcd fails the test (`make test` installs it)
// unless TOLLGATE_SKIP_ETCD=1, which skips the test instead.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	return startEtcd(t, "", "")
}

// StartEtcdTLS is StartEtcd with the client URL served over TLS with
// the given certificate, e.g. one from TestCA.Issue for "localhost".
func StartEtcdTLS(t testing.TB, certFile, keyFile string) *Etcd {
	t.Helper()
	return startEtcd(t, certFile, keyFile)
}

func startEtcd(t testing.TB, certFile, keyFile string) *Etcd {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("TOLLGATE_SKIP_ETCD") == "1" {
			t.Skip("etcd not installed and TOLLGATE_SKIP_ETCD=1")
		}
		t.Fatal("etcd not found in PATH: `make test` installs it " +
			"(or set TOLLGATE_SKIP_ETCD=1 to skip the tests that need it)")
	}
	e := &Etcd{serverProcess: serverProcess{t: t, name: "etcd"}, bin: bin, dir: t.TempDir(), certFile: certFile, keyFile: keyFile}
	e.serverProcess.start, e.where = e.start, func() string { return e.URL }
	t.Cleanup(e.Kill)
	scheme := "http"
	if certFile != "" {
		scheme = "https"
	}
	// Ports taken from the kernel may be grabbed by someone else before
	// etcd binds them; try a few.
	var lastErr error
	for range 5 {
		client, peer := freePort(t), freePort(t)
		e.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(client))
		e.URL = scheme + "://" + e.Endpoint
		e.peerURL = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(peer))
		// A failed try may have left a half-made member behind.
		_ = os.RemoveAll(filepath.Join(e.dir, "data"))
		if lastErr = e.start(); lastErr == nil {
			return e
		}
	}
	t.Fatalf("starting etcd: %v", lastErr)
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs the member and waits until it is healthy. The caller must
// not hold e.mu.
func (e *Etcd) start() error {
	logFile := filepath.Join(e.dir, "etcd.log")
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(e.bin,
		"--name", "t",
		"--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", e.URL,
		"--advertise-client-urls", e.URL,
		"--listen-peer-urls", e.peerURL,
		"--initial-advertise-peer-urls", e.peerURL,
		"--initial-cluster", "t="+e.peerURL,
	)
	if e.certFile != "" {
		cmd.Args = append(cmd.Args, "--cert-file", e.certFile, "--key-file", e.keyFile)
	}
	cmd.Dir, cmd.Stdout, cmd.Stderr = e.dir, out, out
	done, err := e.run(cmd)
	if err != nil {
		return err
	}
	return e.awaitReady(done, logFile, etcdStartWait, e.healthy)
}

// healthy asks /health, which says true once the member has a leader.
func (e *Etcd) healthy() bool {
	client := &http.Client{
		Timeout: time.Second,
		// Only readiness is asked here; the tests check the certificate.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a readiness probe
	}
	defer client.CloseIdleConnections()
	resp, err := client.Get(e.URL + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
}
