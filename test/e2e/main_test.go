//go:build e2e

// Package e2e holds the end-to-end tests: they build the tollgate binary
// once and run it, as operators do, against real upstreams and
// redis-server on loopback, several processes at a time. They carry the
// e2e build tag so unit-test runs do not pay for the build:
//
//	go test -tags e2e ./test/e2e/      (make test runs them)
package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tollgate-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "tollgate")
	build := exec.Command("go", "build", "-race", "-o", binary, "github.com/tollgate/tollgate/cmd/tollgate")
	if !raceEnabled {
		build = exec.Command("go", "build", "-o", binary, "github.com/tollgate/tollgate/cmd/tollgate")
	}
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building tollgate:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running gateway process.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	admin  string
	stderr *syncBuffer
	done   chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t *testing.T) string { return testutil.FreeAddr(t) }

// startProc runs the binary with args and env until it answers on addr.
// An empty addr or admin is a fresh loopback port: a port found free can be
// taken before the gateway binds it (by a connection another process, or
// the gateway itself, opens meanwhile), so then the start is tried again
// with fresh ones.
func startProc(t *testing.T, addr, admin string, env []string, args ...string) *proc {
	t.Helper()
	for try := 1; ; try++ {
		a, m := addr, admin
		if a == "" {
			a = freePort(t)
		}
		if m == "" {
			m = freePort(t)
		}
		p, err := tryProc(t, a, m, env, args)
		if err == nil {
			return p
		}
		if try < 3 && (addr == "" || admin == "") && strings.Contains(p.stderr.String(), "address already in use") {
			continue
		}
		t.Fatalf("%v\n%s", err, p.stderr.String())
	}
}

func tryProc(t *testing.T, addr, admin string, env, args []string) (*proc, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "TOLLGATE_LISTEN="+addr, "TOLLGATE_ADMIN_LISTEN="+admin)
	if !strings.Contains(strings.Join(env, "\n"), "TOLLGATE_ACCESS_LOG=") {
		cmd.Env = append(cmd.Env, "TOLLGATE_ACCESS_LOG=off")
	}
	p := &proc{cmd: cmd, addr: addr, admin: admin, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("gateway stderr:\n%s", p.stderr.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return p, nil
		}
		select {
		case err := <-p.done:
			p.done <- err // for the cleanup, which waits for the exit too
			return p, fmt.Errorf("gateway exited: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return p, errors.New("gateway did not start")
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDemoModeAnswersAtOnce(t *testing.T) {
	addr := freePort(t)
	p := startProc(t, addr, "off", nil, "run")
	status, body := testutil.Get(t, "http://"+addr+"/demo/echo")
	if status != 200 || !strings.Contains(body, `"upstream":"tollgate demo"`) || !strings.Contains(body, `"uri":"/demo/echo"`) {
		t.Fatalf("demo: %d %s", status, body)
	}
	status, body = testutil.Get(t, "http://"+addr+"/elsewhere")
	if status != 404 || !strings.Contains(body, "no route") {
		t.Fatalf("demo not found: %d %s", status, body)
	}
	_ = p
}

func TestValidateCommand(t *testing.T) {
	good := writeConfig(t, "services:\n  s: {instances: [{addr: \"127.0.0.1:9\"}]}\nroutes:\n  - {name: r, match: {prefix: /}, service: s}\n")
	out, err := exec.Command(binary, "validate", good).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok (1 routes, 1 services)") {
		t.Fatalf("validate good: %v %s", err, out)
	}
	bad := writeConfig(t, "services:\n  s: {instances: [{addr: \"127.0.0.1:9\"}]}\nroutes:\n  - name: r\n    match: {prefix: /}\n    servce: s\n")
	out, err = exec.Command(binary, "validate", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), ":6:5: unknown setting \"routes[0].servce\"") {
		t.Fatalf("validate bad: %v %s", err, out)
	}
	out, _ = exec.Command(binary, "--help").CombinedOutput()
	for _, want := range []string{"TOLLGATE_LISTEN", "TOLLGATE_WORKERS", "TOLLGATE_TRANSPORT", "TOLLGATE_MAX_BODY_BYTES", "TOLLGATE_READ_TIMEOUT"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("--help lacks %s:\n%s", want, out)
		}
	}
}

// load runs GET clients against url until stop closes and counts outcomes.
type load struct {
	ok, non2xx, errs atomic.Int64
	statuses         sync.Map
	wg               sync.WaitGroup
	stop             chan struct{}
}

func startLoad(addr, path string, clients int) *load {
	l := &load{stop: make(chan struct{})}
	for range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			c := &fasthttp.HostClient{Addr: addr, ReadTimeout: 5 * time.Second, MaxIdemponentCallAttempts: 1}
			var req fasthttp.Request
			var resp fasthttp.Response
			req.SetRequestURI("http://" + addr + path)
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				if err := c.Do(&req, &resp); err != nil {
					l.errs.Add(1)
					continue
				}
				if resp.StatusCode()/100 == 2 {
					l.ok.Add(1)
				} else {
					l.non2xx.Add(1)
					v, _ := l.statuses.LoadOrStore(resp.StatusCode(), new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
				}
			}
		}()
	}
	return l
}

func (l *load) finish() { close(l.stop); l.wg.Wait() }

func (l *load) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ok=%d non2xx=%d errors=%d", l.ok.Load(), l.non2xx.Load(), l.errs.Load())
	l.statuses.Range(func(k, v any) bool { fmt.Fprintf(&b, " [%d]=%d", k, v.(*atomic.Int64).Load()); return true })
	return b.String()
}

const twoInstances = `
watch: false
services:
  api:
    instances: [{addr: "%s"}, {addr: "%s"}]
    timeouts: {connect: 500ms, read: 1s, total: 3s}
routes:
  - name: api
    priority: %d
    match: {prefix: /}
    service: api
`

func TestReloadUnderLoad(t *testing.T) {
	for _, transport := range []string{"netpoll", "fasthttp"} {
		t.Run(transport, func(t *testing.T) {
			a := testutil.StartQuietUpstream(t, "a")
			b := testutil.StartQuietUpstream(t, "b")
			cfg := writeConfig(t, fmt.Sprintf(twoInstances, a.Addr, b.Addr, 1))
			addr := freePort(t)
			p := startProc(t, addr, "off", []string{"TOLLGATE_TRANSPORT=" + transport}, "run", "-c", cfg)
			l := startLoad(addr, "/r", 8)
			for i := range 10 {
				time.Sleep(150 * time.Millisecond)
				// Alternate a real change so each reload builds a new table.
				if err := os.WriteFile(cfg, []byte(fmt.Sprintf(twoInstances, a.Addr, b.Addr, i+2)), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(200 * time.Millisecond)
			l.finish()
			if l.errs.Load() != 0 || l.non2xx.Load() != 0 || l.ok.Load() < 100 {
				t.Fatalf("during 10 reloads: %s", l.summary())
			}
			if n := strings.Count(p.stderr.String(), "configuration reloaded"); n != 10 {
				t.Fatalf("%d reloads logged, want 10", n)
			}
			if !strings.Contains(p.stderr.String(), `"version":11`) {
				t.Fatal("version did not reach 11 after 10 reloads")
			}
			t.Logf("%s: %s", transport, l.summary())
		})
	}
}

func TestFileWatchReloads(t *testing.T) {
	a := testutil.StartUpstream(t, "a")
	b := testutil.StartUpstream(t, "b")
	conf := func(addr string) string {
		return fmt.Sprintf("services:\n  s: {instances: [{addr: %q}]}\nroutes:\n  - {name: r, match: {prefix: /}, service: s}\n", addr)
	}
	cfg := writeConfig(t, conf(a.Addr))
	addr, admin := freePort(t), freePort(t)
	startProc(t, addr, admin, nil, "run", "-c", cfg)
	if _, body := testutil.Get(t, "http://"+addr+"/"); body != "a" {
		t.Fatalf("before: %s", body)
	}
	if err := os.WriteFile(cfg, []byte(conf(b.Addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, body := testutil.Get(t, "http://"+addr+"/"); body == "b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the edited file was not picked up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Saving the same text again is not a new version.
	if err := os.WriteFile(cfg, []byte(conf(b.Addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, body := testutil.Get(t, "http://"+admin+"/admin/config"); !strings.Contains(body, `"version":2`) {
		t.Fatalf("version after one edit and one identical save: %s", body)
	}
}

func TestBadReloadKeepsRunningConfig(t *testing.T) {
	up := testutil.StartUpstream(t, "up")
	cfg := writeConfig(t, fmt.Sprintf(twoInstances, up.Addr, up.Addr, 1))
	addr, admin := freePort(t), freePort(t)
	p := startProc(t, addr, admin, []string{"TOLLGATE_ADMIN_TOKEN=s3cret"}, "run", "-c", cfg)
	if err := os.WriteFile(cfg, []byte("routes:\n  - name: x\n    match: {prefix: /}\n    service: missing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	// The admin endpoint reloads too, and says why it refused.
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.SetRequestURI("http://" + admin + "/admin/reload")
	req.Header.SetMethod("POST")
	req.Header.Set("Authorization", "Bearer s3cret")
	if err := fasthttp.DoTimeout(req, resp, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != 422 || !strings.Contains(string(resp.Body()), `service \"missing\" is not defined`) {
		t.Fatalf("admin reload of a bad file: %d %s", resp.StatusCode(), resp.Body())
	}
	req.Header.Set("Authorization", "Bearer wrong")
	_ = fasthttp.DoTimeout(req, resp, 3*time.Second)
	if resp.StatusCode() != 401 {
		t.Fatalf("wrong token: %d", resp.StatusCode())
	}
	if status, _ := testutil.Get(t, "http://"+addr+"/still"); status != 200 {
		t.Fatalf("after a refused reload: %d", status)
	}
	req.SetRequestURI("http://" + admin + "/admin/config")
	req.Header.SetMethod("GET")
	req.Header.Set("Authorization", "Bearer s3cret")
	if err := fasthttp.DoTimeout(req, resp, 3*time.Second); err != nil || !strings.Contains(string(resp.Body()), `"version":1`) {
		t.Fatalf("version changed by a refused reload: %v %s", err, resp.Body())
	}
	if !strings.Contains(p.stderr.String(), "reload refused") {
		t.Fatal("refused reload not logged")
	}
}

func TestUpstreamKilledUnderLoad(t *testing.T) {
	a := testutil.StartQuietUpstream(t, "a")
	b := testutil.StartQuietUpstream(t, "b")
	cfg := writeConfig(t, fmt.Sprintf(twoInstances, a.Addr, b.Addr, 1))
	addr := freePort(t)
	startProc(t, addr, "off", nil, "run", "-c", cfg)
	l := startLoad(addr, "/k", 8)
	time.Sleep(300 * time.Millisecond)
	before := l.ok.Load()
	a.Close() // closes the listener and every connection, mid-traffic
	time.Sleep(700 * time.Millisecond)
	l.finish()
	if l.ok.Load() <= before {
		t.Fatal("no traffic after the kill")
	}
	// GETs that hit the dead instance are retried on the live one; only a
	// request whose connection died mid-exchange may see a 502.
	if l.errs.Load() != 0 || l.non2xx.Load() > 8 {
		t.Fatalf("after killing one of two instances: %s", l.summary())
	}
	t.Logf("kill under load: %s", l.summary())
}

func TestHangingUpstream504WithinReadTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and reads, never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(c)) }()
		}
	}()
	cfg := writeConfig(t, fmt.Sprintf(`
services:
  hang:
    instances: [{addr: "%s"}]
    timeouts: {connect: 200ms, read: 400ms, total: 2s}
routes:
  - {name: hang, match: {prefix: /}, service: hang}
`, ln.Addr()))
	addr := freePort(t)
	startProc(t, addr, "off", nil, "run", "-c", cfg)
	start := time.Now()
	status, body := testutil.Get(t, "http://"+addr+"/wait")
	took := time.Since(start)
	if status != 504 || !strings.Contains(body, `"code":504`) {
		t.Fatalf("hanging upstream: %d %s", status, body)
	}
	if took < 350*time.Millisecond || took > 1500*time.Millisecond {
		t.Fatalf("504 after %v, want about the 400ms read timeout", took)
	}
}

func TestSIGTERMDrainsInFlight(t *testing.T) {
	up := testutil.StartUpstream(t, "slow")
	up.Delay.Store(int64(600 * time.Millisecond))
	cfg := writeConfig(t, fmt.Sprintf(twoInstances, up.Addr, up.Addr, 1))
	addr := freePort(t)
	p := startProc(t, addr, "off", nil, "run", "-c", cfg)
	result := make(chan int, 1)
	go func() {
		status, _, err := fasthttp.GetTimeout(nil, "http://"+addr+"/slow", 5*time.Second)
		if err != nil {
			status = -1
		}
		result <- status
	}()
	time.Sleep(200 * time.Millisecond)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if st := <-result; st != 200 {
		t.Fatalf("in-flight request during drain: %d", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("gateway did not exit after SIGTERM")
	}
	if _, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		t.Fatal("still accepting after drain")
	}
}

func execCommand(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
