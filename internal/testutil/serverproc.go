package testutil

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serverProcess is a server a test started (redis-server, etcd, dnsmasq)
// and handles as an operator meets a misbehaving one: frozen, thawed,
// killed and restarted on the same ports. The server types embed it and
// give it the start that runs their command (through run) and waits
// until the server answers.
//
// Its methods are safe for concurrent use.
type serverProcess struct {
	t     testing.TB
	name  string        // the server's name in messages
	where func() string // where it listens, for messages
	start func() error  // must not hold mu

	mu sync.Mutex
	// PID is the process id of the running server (it changes on
	// Restart); written under mu.
	PID    int
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has been waited for
	frozen bool
}

// run starts cmd as the server's process and returns the channel closed
// when it has exited.
func (p *serverProcess) run(cmd *exec.Cmd) (chan struct{}, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done, p.frozen = cmd, done, false
	p.PID = cmd.Process.Pid
	p.mu.Unlock()
	return done, nil
}

// awaitReady waits until ready says the server answers, up to wait; a
// server that exits first, or does not answer in time (it is killed), is
// an error carrying the end of its log.
func (p *serverProcess) awaitReady(done <-chan struct{}, logFile string, wait time.Duration, ready func() bool) error {
	deadline := time.Now().Add(wait)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited at start: %s", p.name, tail(logFile))
		default:
		}
		if ready() {
			return nil
		}
		if time.Now().After(deadline) {
			p.Kill()
			return fmt.Errorf("%s on %s did not answer within %v: %s", p.name, p.where(), wait, tail(logFile))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Freeze stops the server with SIGSTOP: its sockets stay open and
// nothing answers, as with a hung or overloaded server.
func (p *serverProcess) Freeze() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.frozen {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Errorf("freezing %s: %v", p.name, err)
		return
	}
	p.frozen = true
}

// Thaw resumes a frozen server with SIGCONT.
func (p *serverProcess) Thaw() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.thawLocked()
}

func (p *serverProcess) thawLocked() {
	if p.cmd == nil || !p.frozen {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		p.t.Errorf("thawing %s: %v", p.name, err)
	}
	p.frozen = false
}

// Kill ends the server with SIGKILL and waits until it is gone, so its
// ports are free for Restart. A frozen server is thawed first.
func (p *serverProcess) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if cmd == nil {
		p.mu.Unlock()
		return
	}
	p.thawLocked()
	_ = cmd.Process.Kill()
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.t.Errorf("%s pid %d did not exit after SIGKILL", p.name, cmd.Process.Pid)
	}
}

// Restart kills the server if it runs and starts it again on the same
// ports.
func (p *serverProcess) Restart() {
	p.t.Helper()
	p.Kill()
	var err error
	// The ports were just released; binding them again normally
	// succeeds at once, but give the kernel a moment if it does not.
	for range 50 {
		if err = p.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("restarting %s on %s: %v", p.name, p.where(), err)
}
