package testutil

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// DNSMasq is a real dnsmasq name server on 127.0.0.1, private to one
// test: its own port (UDP and TCP), its own directory, no upstream and no
// /etc/hosts, answering only the records it is given. It is stopped when
// the test ends, thawed first if the test left it frozen.
//
// The methods are safe for concurrent use.
type DNSMasq struct {
	// Addr is host:port of the server; it stays the same across SetConfig
	// and Restart.
	Addr string

	serverProcess

	bin  string
	port int
	dir  string

	lines []string // under mu
}

// dnsmasqStartWait bounds how long a started server may take to listen.
const dnsmasqStartWait = 10 * time.Second

// StartDNSMasq starts dnsmasq on a free loopback port with lines as its
// configuration file (dnsmasq.conf syntax: "srv-host=…", "host-record=…",
// "local=/test/", "local-ttl=1", …) and waits until it listens. A missing
// dnsmasq fails the test (`make test` installs it) unless
// TOLLGATE_SKIP_DNSMASQ=1, which skips the test instead.
func StartDNSMasq(t testing.TB, lines ...string) *DNSMasq {
	t.Helper()
	bin, err := findDNSMasq()
	if err != nil {
		if os.Getenv("TOLLGATE_SKIP_DNSMASQ") == "1" {
			t.Skip("dnsmasq not installed and TOLLGATE_SKIP_DNSMASQ=1")
		}
		t.Fatal("dnsmasq not found in PATH nor /usr/sbin: `make test` installs it " +
			"(Debian package dnsmasq-base), or set TOLLGATE_SKIP_DNSMASQ=1 to skip the tests that need it")
	}
	d := &DNSMasq{serverProcess: serverProcess{t: t, name: "dnsmasq"}, bin: bin, dir: t.TempDir(), lines: lines}
	d.serverProcess.start, d.where = d.start, func() string { return d.Addr }
	t.Cleanup(d.Kill)
	// A port taken from the kernel may be grabbed by someone else before
	// dnsmasq binds it, on UDP or TCP; try a few.
	var lastErr error
	for range 5 {
		d.port, lastErr = freeUDPAndTCPPort()
		if lastErr != nil {
			continue
		}
		d.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port))
		if lastErr = d.start(); lastErr == nil {
			return d
		}
	}
	t.Fatalf("starting dnsmasq: %v", lastErr)
	return nil
}

// findDNSMasq looks in PATH, then in /usr/sbin, which is not in every
// user's PATH.
func findDNSMasq() (string, error) {
	if p, err := exec.LookPath("dnsmasq"); err == nil {
		return p, nil
	}
	const sbin = "/usr/sbin/dnsmasq"
	if fi, err := os.Stat(sbin); err == nil && fi.Mode()&0o111 != 0 {
		return sbin, nil
	}
	return "", errors.New("dnsmasq not found")
}

// freeUDPAndTCPPort returns a loopback port that is free for both.
func freeUDPAndTCPPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	pc.Close()
	return port, nil
}

// start writes the configuration and runs dnsmasq on d.port. The caller
// must not hold d.mu.
func (d *DNSMasq) start() error {
	d.mu.Lock()
	conf := strings.Join(d.lines, "\n") + "\n"
	d.mu.Unlock()
	confFile := filepath.Join(d.dir, "dnsmasq.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return err
	}
	logFile := filepath.Join(d.dir, "dnsmasq.log")
	logOut, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logOut.Close()
	cmd := exec.Command(d.bin,
		"--no-daemon",
		"--port="+strconv.Itoa(d.port),
		"--listen-address=127.0.0.1",
		"--bind-interfaces",
		"--no-resolv",
		"--no-hosts",
		"--no-poll",
		"--pid-file=",
		"--log-facility=-",
		"--log-queries",
		"--conf-file="+confFile,
	)
	if os.Geteuid() == 0 {
		// As root dnsmasq changes to "nobody"; stay, so that signals and
		// the log file work the same for every user.
		cmd.Args = append(cmd.Args, "--user=root", "--group=root")
	}
	cmd.Dir = d.dir
	cmd.Stdout, cmd.Stderr = logOut, logOut
	done, err := d.run(cmd)
	if err != nil {
		return err
	}
	return d.awaitReady(done, logFile, dnsmasqStartWait, d.answers)
}

// answers sends a query for the root's SOA over UDP and TCP and reports
// whether both got a reply of any kind: then dnsmasq serves both.
func (d *DNSMasq) answers() bool {
	// ID 0x7467, recursion desired, one question: ". SOA IN".
	query := []byte{0x74, 0x67, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 1}
	udp, err := net.DialTimeout("udp", d.Addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer udp.Close()
	_ = udp.SetDeadline(time.Now().Add(100 * time.Millisecond))
	buf := make([]byte, 512)
	if _, err := udp.Write(query); err != nil {
		return false
	}
	if n, err := udp.Read(buf); err != nil || n < 2 || buf[0] != 0x74 || buf[1] != 0x67 {
		return false
	}
	tcp, err := net.DialTimeout("tcp", d.Addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer tcp.Close()
	_ = tcp.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := tcp.Write(append([]byte{0, byte(len(query))}, query...)); err != nil {
		return false
	}
	n, err := tcp.Read(buf)
	return err == nil && n >= 4 && buf[2] == 0x74 && buf[3] == 0x67
}

// SetConfig replaces the configuration and restarts dnsmasq on the same
// port with it: dnsmasq rereads only some of its files on SIGHUP, and
// not srv-host or host-record lines.
func (d *DNSMasq) SetConfig(lines ...string) {
	d.t.Helper()
	d.mu.Lock()
	d.lines = lines
	d.mu.Unlock()
	d.Restart()
}

// Log returns the end of the server's log (its queries are logged), for
// a failing test's message.
func (d *DNSMasq) Log() string { return tail(filepath.Join(d.dir, "dnsmasq.log")) }

// Queries counts the queries of type typ ("A", "SRV", …) for name the
// server has logged since it first started.
func (d *DNSMasq) Queries(typ, name string) int {
	b, err := os.ReadFile(filepath.Join(d.dir, "dnsmasq.log"))
	if err != nil {
		return 0
	}
	needle := "query[" + typ + "] " + name + " "
	n := 0
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, needle) {
			n++
		}
	}
	return n
}
