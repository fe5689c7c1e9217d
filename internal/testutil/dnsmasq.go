package testutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

	t    testing.TB
	bin  string
	port int
	dir  string

	mu     sync.Mutex
	lines  []string
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has been waited for
	frozen bool
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
	d := &DNSMasq{t: t, bin: bin, dir: t.TempDir(), lines: lines}
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
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	d.mu.Lock()
	d.cmd, d.done, d.frozen = cmd, done, false
	d.mu.Unlock()

	deadline := time.Now().Add(dnsmasqStartWait)
	for {
		select {
		case <-done:
			return fmt.Errorf("dnsmasq exited at start: %s", tail(logFile))
		default:
		}
		if d.answers() {
			return nil
		}
		if time.Now().After(deadline) {
			d.Kill()
			return fmt.Errorf("dnsmasq on %s did not listen within %v: %s", d.Addr, dnsmasqStartWait, tail(logFile))
		}
		time.Sleep(5 * time.Millisecond)
	}
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

// Freeze stops the server with SIGSTOP: its sockets stay bound and
// nothing answers, as with a hung or overloaded name server.
func (d *DNSMasq) Freeze() {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil || d.frozen {
		return
	}
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		d.t.Errorf("freezing dnsmasq: %v", err)
		return
	}
	d.frozen = true
}

// Thaw resumes a frozen server with SIGCONT.
func (d *DNSMasq) Thaw() {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.thawLocked()
}

func (d *DNSMasq) thawLocked() {
	if d.cmd == nil || !d.frozen {
		return
	}
	if err := d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		d.t.Errorf("thawing dnsmasq: %v", err)
	}
	d.frozen = false
}

// Kill ends the server with SIGKILL and waits until it is gone, so its
// port is free for Restart. A frozen server is thawed first.
func (d *DNSMasq) Kill() {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	if cmd == nil {
		d.mu.Unlock()
		return
	}
	d.thawLocked()
	_ = cmd.Process.Kill()
	d.cmd, d.done = nil, nil
	d.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		d.t.Errorf("dnsmasq pid %d did not exit after SIGKILL", cmd.Process.Pid)
	}
}

// Restart kills the server if it runs and starts it again on the same
// port with the current configuration.
func (d *DNSMasq) Restart() {
	d.t.Helper()
	d.Kill()
	var err error
	// The port was just released; binding it again normally succeeds at
	// once, but give the kernel a moment if it does not.
	for range 50 {
		if err = d.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.t.Fatalf("restarting dnsmasq on %s: %v", d.Addr, err)
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
