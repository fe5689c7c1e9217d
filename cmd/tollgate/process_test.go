package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// processConfig is a gateway on loopback ports chosen by the kernel, with
// its admin listener, in front of one upstream; routes are added per test.
const processConfig = `
listen: "127.0.0.1:0"
watch: %v
drain_delay: %s
shutdown_timeout: 5s
access_log: {path: off}
admin: {listen: "127.0.0.1:0"}
services:
  up:
    instances: [{addr: "%s"}]
routes:
%s`

// testProcess is a gateway process started in the test's own process:
// startProcess, serve and wait as `tollgate run` runs them, with signals
// sent on a channel instead of by the kernel.
type testProcess struct {
	*process
	cfg  string // the configuration file
	sigs chan os.Signal
	done chan error // wait's result, once
	// stopped is closed once wait has returned.
	stopped chan struct{}
}

func startTestProcess(t *testing.T, cfg string) *testProcess {
	t.Helper()
	p, err := startProcess(cfg, zaptest.NewLogger(t), zap.NewAtomicLevel())
	if err != nil {
		t.Fatal(err)
	}
	tp := &testProcess{process: p, cfg: cfg, sigs: make(chan os.Signal, 4), done: make(chan error, 1), stopped: make(chan struct{})}
	p.serve()
	go func() {
		tp.done <- p.wait(tp.sigs)
		close(tp.stopped)
	}()
	t.Cleanup(func() {
		select {
		case <-tp.stopped:
		default:
			tp.sigs <- syscall.SIGTERM
			tp.sigs <- syscall.SIGTERM // and no drain delay
			<-tp.stopped
		}
		p.close()
	})
	return tp
}

func writeProcessConfig(t *testing.T, path string, watch bool, drainDelay, upstream, routes string) {
	t.Helper()
	text := fmt.Sprintf(processConfig, watch, drainDelay, upstream, routes)
	// Written beside and renamed: the watcher never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// upstreamNamed answers every request with its path, after the handler's
// gate (nil: at once).
func upstreamNamed(t *testing.T, gate chan struct{}) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gate != nil {
			<-gate
		}
		io.WriteString(w, "upstream saw "+r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

func (tp *testProcess) addr() string      { return tp.ln.Addr().String() }
func (tp *testProcess) adminAddr() string { return tp.adminLn.Addr().String() }

// status is the status of GET url on a fresh connection (0 when it could
// not be sent).
func status(url string) int {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// eventually polls cond until it holds, failing the test at the deadline.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProcessReloadsOnFileChange: with watch: true an edit of the file
// serves the new routes without a signal, and a broken edit is refused
// while the running configuration goes on serving.
func TestProcessReloadsOnFileChange(t *testing.T) {
	up := upstreamNamed(t, nil)
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	writeProcessConfig(t, cfg, true, "0s", up.Listener.Addr().String(), "  - {name: a, match: {prefix: /a/}, service: up}\n")
	tp := startTestProcess(t, cfg)
	base := "http://" + tp.addr()
	if st := status(base + "/a/x"); st != 200 {
		t.Fatalf("/a/ at start: %d", st)
	}
	if st := status(base + "/b/x"); st != 404 {
		t.Fatalf("/b/ before the edit: %d", st)
	}
	v := tp.gw.Snapshot().Version
	writeProcessConfig(t, cfg, true, "0s", up.Listener.Addr().String(),
		"  - {name: a, match: {prefix: /a/}, service: up}\n  - {name: b, match: {prefix: /b/}, service: up}\n")
	eventually(t, 5*time.Second, "the edited file is served", func() bool { return status(base+"/b/x") == 200 })
	if got := tp.gw.Snapshot().Version; got != v+1 {
		t.Fatalf("version %d after one edit, want %d", got, v+1)
	}
	if err := os.WriteFile(cfg, []byte("routes: [{name: broken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The refusal is counted where operators see it: /metrics.
	eventually(t, 5*time.Second, "the broken edit is refused and counted", func() bool {
		return strings.Contains(get(t, "http://"+tp.adminAddr()+"/metrics"), `tollgate_config_reloads_total{result="refused"} 1`)
	})
	if st := status(base + "/b/x"); st != 200 || tp.gw.Snapshot().Version != v+1 {
		t.Fatalf("after a refused edit: /b/ %d, version %d (want 200, %d)", st, tp.gw.Snapshot().Version, v+1)
	}
	if m := get(t, "http://"+tp.adminAddr()+"/metrics"); !strings.Contains(m, "tollgate_config_last_reload_successful 0") {
		t.Fatal("the refused edit does not show as the last load failing")
	}
	// The file put back as it runs: nothing to load, and the alert on the
	// last load clears (no reload is counted: none happened).
	writeProcessConfig(t, cfg, true, "0s", up.Listener.Addr().String(),
		"  - {name: a, match: {prefix: /a/}, service: up}\n  - {name: b, match: {prefix: /b/}, service: up}\n")
	eventually(t, 5*time.Second, "the file back to what runs clears the failed load", func() bool {
		return strings.Contains(get(t, "http://"+tp.adminAddr()+"/metrics"), "tollgate_config_last_reload_successful 1")
	})
	// Two applied loads: the start and the first edit.
	m := get(t, "http://"+tp.adminAddr()+"/metrics")
	if tp.gw.Snapshot().Version != v+1 || !strings.Contains(m, `tollgate_config_reloads_total{result="ok"} 2`) {
		t.Fatalf("putting the file back reloaded: version %d, metrics:\n%s", tp.gw.Snapshot().Version, m)
	}
}

// TestProcessSIGHUPReloads: without the watch, SIGHUP re-reads the file;
// a file that does not load leaves the running configuration.
func TestProcessSIGHUPReloads(t *testing.T) {
	up := upstreamNamed(t, nil)
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	writeProcessConfig(t, cfg, false, "0s", up.Listener.Addr().String(), "  - {name: a, match: {prefix: /a/}, service: up}\n")
	tp := startTestProcess(t, cfg)
	base := "http://" + tp.addr()
	writeProcessConfig(t, cfg, false, "0s", up.Listener.Addr().String(), "  - {name: b, match: {prefix: /b/}, service: up}\n")
	if st := status(base + "/b/x"); st != 404 {
		t.Fatalf("/b/ before SIGHUP: %d (watch: false must not reload)", st)
	}
	v := tp.gw.Snapshot().Version
	tp.sigs <- syscall.SIGHUP
	eventually(t, 5*time.Second, "SIGHUP serves the edited file", func() bool { return tp.gw.Snapshot().Version == v+1 })
	if a, b := status(base+"/a/x"), status(base+"/b/x"); a != 404 || b != 200 {
		t.Fatalf("after SIGHUP: /a/ %d, /b/ %d; want 404, 200", a, b)
	}
	if err := os.WriteFile(cfg, []byte("listen: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tp.sigs <- syscall.SIGHUP
	eventually(t, 5*time.Second, "the refused reload is counted", func() bool {
		return strings.Contains(get(t, "http://"+tp.adminAddr()+"/metrics"), `tollgate_config_reloads_total{result="refused"} 1`)
	})
	if st := status(base + "/b/x"); st != 200 || tp.gw.Snapshot().Version != v+1 {
		t.Fatalf("after a refused SIGHUP: /b/ %d, version %d", st, tp.gw.Snapshot().Version)
	}
}

// TestProcessDrain: on SIGTERM /readyz answers 503 at once while the
// gateway still serves, every answer closes its connection, and once
// drain_delay is over the listeners close and wait returns.
func TestProcessDrain(t *testing.T) {
	up := upstreamNamed(t, nil)
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	// A drain delay long enough to look at; a second SIGTERM cuts it short.
	writeProcessConfig(t, cfg, false, "30s", up.Listener.Addr().String(), "  - {name: a, match: {prefix: /a/}, service: up}\n")
	tp := startTestProcess(t, cfg)
	admin := "http://" + tp.adminAddr()
	if st := status(admin + "/readyz"); st != 200 {
		t.Fatalf("readyz before the drain: %d", st)
	}
	conn, err := net.Dial("tcp", tp.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	roundTrip := func() *http.Response {
		t.Helper()
		if _, err := io.WriteString(conn, "GET /a/x HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := roundTrip(); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("before the drain: %d, close %v", resp.StatusCode, resp.Close)
	}

	tp.sigs <- syscall.SIGTERM
	eventually(t, 5*time.Second, "readyz turns 503", func() bool { return status(admin+"/readyz") == 503 })
	// Still serving, on the connection kept alive before: the answer says
	// it is the connection's last.
	if resp := roundTrip(); resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("during the drain: %d, close %v; want 200 and Connection: close", resp.StatusCode, resp.Close)
	}
	if _, err := rd.ReadByte(); err != io.EOF {
		t.Fatalf("the gateway kept the connection after Connection: close: %v", err)
	}
	if st := status("http://" + tp.addr() + "/a/x"); st != 200 {
		t.Fatalf("a new connection during the drain delay: %d", st)
	}
	select {
	case err := <-tp.done:
		t.Fatalf("the process stopped during the drain delay: %v", err)
	default:
	}

	tp.sigs <- syscall.SIGTERM // the impatient operator: the delay ends now
	select {
	case err := <-tp.done:
		if err != nil {
			t.Fatalf("wait after the drain: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not stop after the second SIGTERM")
	}
	for _, addr := range []string{tp.addr(), tp.adminAddr()} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("%s still accepts connections after the drain", addr)
		}
	}
}

// TestProcessShutdownWaitsForRequestsInFlight: the listeners close at once
// (drain_delay: 0s), but a request the upstream is still answering gets
// its answer before the process stops.
func TestProcessShutdownWaitsForRequestsInFlight(t *testing.T) {
	gate := make(chan struct{})
	arrived := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-gate
		io.WriteString(w, "late")
	}))
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	writeProcessConfig(t, cfg, false, "0s", up.Listener.Addr().String(), "  - {name: a, match: {prefix: /a/}, service: up}\n")
	tp := startTestProcess(t, cfg)

	type answer struct {
		status int
		body   string
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + tp.addr() + "/a/slow")
		if err != nil {
			got <- answer{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- answer{resp.StatusCode, string(b), err}
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach the upstream")
	}
	tp.sigs <- syscall.SIGTERM
	eventually(t, 5*time.Second, "the listener closes", func() bool {
		c, err := net.DialTimeout("tcp", tp.addr(), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-tp.done:
		t.Fatalf("the process stopped with a request in flight: %v", err)
	case a := <-got:
		t.Fatalf("the request in flight was answered before the upstream answered: %+v", a)
	default:
	}
	close(gate)
	select {
	case a := <-got:
		if a.err != nil || a.status != 200 || a.body != "late" {
			t.Fatalf("the request in flight: %+v", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request in flight got no answer")
	}
	select {
	case err := <-tp.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not stop once the request was answered")
	}
}

// get is the body of GET url.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestProcessStartFailureReleasesWhatItMade: a start refused late (an
// admin listener on a public address without a token) releases what it
// had made and returns its error, not a process.
func TestProcessStartFailureReleasesWhatItMade(t *testing.T) {
	up := upstreamNamed(t, nil)
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	writeProcessConfig(t, cfg, false, "0s", up.Listener.Addr().String(), "  - {name: a, match: {prefix: /a/}, service: up}\n")
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Any address the kernel has that is not loopback.
	var public string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
			public = ip.IP.String()
			break
		}
	}
	if public == "" {
		t.Skip("no non-loopback IPv4 address on this host")
	}
	text = []byte(strings.Replace(string(text), `admin: {listen: "127.0.0.1:0"}`, `admin: {listen: "`+public+`:0"}`, 1))
	if err := os.WriteFile(cfg, text, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := startProcess(cfg, zaptest.NewLogger(t), zap.NewAtomicLevel())
	if err == nil {
		p.close()
		t.Fatal("started with a public admin address and no token")
	}
	if p != nil {
		t.Fatalf("a failed start returned a process: %+v", p)
	}
}
