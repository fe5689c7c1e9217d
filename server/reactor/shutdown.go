//go:build linux

package reactor

import (
	"context"
	"net"
	"syscall"
	"time"
)

// Shutdown implements Transport.
func (t *reactorTransport) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	t.shut.Store(true)
	lns := t.lns
	t.lns = nil
	loopLns := t.loopLns
	t.loopLns = map[net.Listener]*loopListener{}
	idle := make([]*clientConn, 0, len(t.live))
	for c := range t.live {
		if c.state.Load() == connIdle {
			idle = append(idle, c)
		}
	}
	t.mu.Unlock()
	defer t.stop()
	if t.o.HTTP2 != nil {
		// GOAWAY on every HTTP/2 connection; each counts as in flight
		// until its streams are answered, so the wait below covers them.
		go func() { _ = t.o.HTTP2.Shutdown(ctx) }()
	}

	// Accepting stops after a short grace: connections the kernel already
	// queued (their clients think they are connected and may have sent a
	// request) are taken and served rather than reset. Every answer from
	// now on carries Connection: close. Idle connections with a request
	// waiting are served; the others are closed once the answers are out
	// and they stayed silent a moment (below), since a keep-alive client
	// may be sending its next request right now.
	for _, ln := range lns {
		// The queue is shrunk to nothing first: from here the kernel drops
		// new SYNs (the client retries and then meets the closed port,
		// before it sent a byte) instead of completing connections nobody
		// will accept.
		if ll := loopLns[ln]; ll != nil {
			ll.shrinkBacklog()
			time.AfterFunc(acceptGrace, ll.stop)
			continue
		}
		shrinkBacklog(ln)
		if d, ok := ln.(interface{ SetDeadline(time.Time) error }); ok && d.SetDeadline(time.Now().Add(acceptGrace)) == nil {
			continue
		}
		_ = ln.Close()
	}
	for _, c := range idle {
		if c.inputWaiting() {
			t.dispatch(c)
		}
	}
	// Then wait for the answers. Once nothing is being served and the
	// listeners are closed, the connections accepted meanwhile are swept:
	// those with a request waiting are served (and closed after it), the
	// silent ones closed. The first sweep waits a moment, so that a request
	// sent right after its connection was accepted has landed.
	settled := time.Time{}
	for {
		if t.busyConns() == 0 && t.serving.Load() == 0 {
			if settled.IsZero() {
				settled = time.Now()
			} else if time.Since(settled) >= shutdownSettle && !t.sweepIdle() {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// sweepIdle closes the idle connections of a shutting-down transport,
// serving first any that has a request waiting; it reports whether it
// found one.
func (t *reactorTransport) sweepIdle() (served bool) {
	t.mu.Lock()
	idle := make([]*clientConn, 0, len(t.live))
	for c := range t.live {
		if c.state.Load() == connIdle {
			idle = append(idle, c)
		}
	}
	t.mu.Unlock()
	for _, c := range idle {
		if c.inputWaiting() {
			t.dispatch(c)
			served = true
			continue
		}
		c.closeIfIdle()
	}
	return served
}

// stop ends the loops and the sweeper. A connection still being served
// (Shutdown ran out of time) closes by itself when it is done.
func (t *reactorTransport) stop() {
	t.stopOnce.Do(func() {
		t.mu.Lock()
		loops, started := t.loops, t.started
		t.loops = nil
		t.started = true // a Serve after Shutdown starts nothing
		t.mu.Unlock()
		if !started {
			return
		}
		close(t.stopSweep)
		<-t.sweepDone
		// Relays have no end of their own but their idle time: they end
		// with the transport (on the loops, stopping ends them anyway).
		t.mu.Lock()
		for c := range t.live {
			if c.relaying.Load() {
				c.shutdownSocket()
			}
		}
		t.mu.Unlock()
		for _, l := range loops {
			l.stop()
		}
	})
}

// sweep closes connections that waited too long for a request: one
// goroutine and one ticker for all connections.
func (t *reactorTransport) sweep() {
	defer close(t.sweepDone)
	tick := time.NewTicker(t.sweepTick)
	defer tick.Stop()
	var expired []*clientConn
	for {
		select {
		case <-t.stopSweep:
			return
		case <-tick.C:
		}
		now := t.now()
		t.clock.Store(now)
		t.mu.Lock()
		for c := range t.live {
			if c.state.Load() != connIdle {
				continue
			}
			wait := t.idleWait
			if !c.used.Load() {
				wait = t.firstWait
			}
			// last is read off the coarse clock, up to a tick early.
			if wait > 0 && now-c.last.Load() >= int64(wait+t.sweepTick) {
				expired = append(expired, c)
			}
		}
		t.mu.Unlock()
		for i, c := range expired {
			c.closeIfIdle()
			expired[i] = nil
		}
		expired = expired[:0]
	}
}

// shrinkBacklog sets a listening socket's accept queue to its minimum
// (listen(fd, 0)), so that during a drain the kernel stops completing
// connections the gateway is about to stop accepting.
func shrinkBacklog(ln net.Listener) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = syscall.Listen(int(fd), 0) })
}
