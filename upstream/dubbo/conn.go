package dubbo

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBusy is a call refused because its connection carries as many calls
// as it may.
var ErrBusy = errors.New("dubbo: too many calls in flight to the instance")

// ErrClosed is a call whose connection closed before its answer.
var ErrClosed = errors.New("dubbo: connection closed")

// TimeoutError is a call that had no answer within its budget.
type TimeoutError struct{}

func (TimeoutError) Error() string   { return "dubbo: call timed out" }
func (TimeoutError) Timeout() bool   { return true }
func (TimeoutError) Temporary() bool { return true }

// waiter is a call waiting for its answer on a connection.
type waiter struct {
	done   chan struct{} // receives one token when the answer is in
	status byte
	body   []byte
	err    error
}

// maxKeptBody is the largest answer buffer a waiter keeps for reuse.
const maxKeptBody = 64 << 10

var waiters = sync.Pool{New: func() any { return &waiter{done: make(chan struct{}, 1)} }}

// Conn is one multiplexed connection to a provider: calls are written
// whole under a lock and matched to their answers by request id.
type Conn struct {
	nc        net.Conn
	maxBody   int
	heartbeat time.Duration

	wmu sync.Mutex // one frame at a time on the wire

	mu      sync.Mutex
	pending map[uint64]*waiter
	err     error // why the connection closed; set once

	slots    chan struct{} // a token per call in flight
	nextID   atomic.Uint64
	lastRead atomic.Int64 // unix nanoseconds
	closed   chan struct{}
}

func newConn(nc net.Conn, maxInFlight, maxBody int, heartbeat time.Duration) *Conn {
	c := &Conn{nc: nc, maxBody: maxBody, heartbeat: heartbeat, pending: make(map[uint64]*waiter),
		slots: make(chan struct{}, maxInFlight), closed: make(chan struct{})}
	c.lastRead.Store(time.Now().UnixNano())
	go c.readLoop()
	go c.keepAlive()
	return c
}

// Err reports why the connection closed, nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; calls waiting on it fail.
func (c *Conn) Close() { c.fail(ErrClosed) }

func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	close(c.closed)
	_ = c.nc.Close()
	for _, w := range pending {
		w.err = err
		w.done <- struct{}{}
	}
}

// RoundTrip sends call (its frame sealed) and waits for the answer until
// deadline.
func (c *Conn) RoundTrip(call *Call, deadline time.Time) error {
	w, err := c.exchange(call.Frame, deadline)
	if err != nil {
		return err
	}
	err = call.decodeAnswer(w.status, w.body)
	release(w)
	return err
}

// Ping sends a heartbeat and waits for its answer until deadline.
func (c *Conn) Ping(deadline time.Time) error {
	f := appendHeader(make([]byte, 0, headerLen+1), flagRequest|flagTwoWay|flagEvent, 0, 0)
	f = append(f, heartbeatBody...)
	finishFrame(f, 0)
	w, err := c.exchange(f, deadline)
	if err != nil {
		return err
	}
	status := w.status
	release(w)
	if status != StatusOK {
		return fmt.Errorf("dubbo: heartbeat answered with status %d", status)
	}
	return nil
}

// exchange writes frame under a fresh request id and waits for its
// answer; the caller releases the waiter it returns.
func (c *Conn) exchange(frame []byte, deadline time.Time) (*waiter, error) {
	select {
	case c.slots <- struct{}{}:
	default:
		return nil, ErrBusy
	}
	defer func() { <-c.slots }()
	id := c.nextID.Add(1)
	binary.BigEndian.PutUint64(frame[4:12], id)
	w := waiters.Get().(*waiter)
	w.body, w.err = w.body[:0], nil
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		waiters.Put(w)
		return nil, err
	}
	c.pending[id] = w
	c.mu.Unlock()

	if err := c.write(frame, deadline); err != nil {
		c.fail(err)
	}
	timer := time.NewTimer(time.Until(deadline))
	select {
	case <-w.done:
	case <-timer.C:
		c.mu.Lock()
		mine := c.pending[id] == w
		if mine {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		if mine {
			// The answer may still come; the reader drops it then.
			waiters.Put(w)
			return nil, TimeoutError{}
		}
		<-w.done // the reader took it just now
	}
	timer.Stop()
	if w.err != nil {
		err := w.err
		release(w)
		return nil, err
	}
	return w, nil
}

func release(w *waiter) {
	if cap(w.body) > maxKeptBody {
		w.body = nil
	}
	waiters.Put(w)
}

func (c *Conn) write(frame []byte, deadline time.Time) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(deadline)
	_, err := c.nc.Write(frame)
	return err
}

// readLoop reads every frame the provider sends and hands answers to
// their callers. One goroutine per connection, not per call: a
// connection carries many calls at once, and an instance has one.
func (c *Conn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 16<<10)
	var hdr [headerLen]byte
	var discard []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			c.fail(readError(err))
			return
		}
		h, err := parseHeader(hdr[:], c.maxBody)
		if err != nil {
			c.fail(err)
			return
		}
		c.lastRead.Store(time.Now().UnixNano())
		if h.request() {
			// The provider's heartbeat, answered; any other request (a
			// consumer receives none) is skipped.
			discard, err = readBody(br, discard[:0], h.length)
			if err == nil && h.event() && h.twoWay() {
				err = c.answerHeartbeat(h.id)
			}
			if err != nil {
				c.fail(readError(err))
				return
			}
			continue
		}
		c.mu.Lock()
		w := c.pending[h.id]
		delete(c.pending, h.id)
		c.mu.Unlock()
		if w == nil { // a late answer, or a heartbeat's no one waits for
			if discard, err = readBody(br, discard[:0], h.length); err != nil {
				c.fail(readError(err))
				return
			}
			if cap(discard) > maxKeptBody {
				discard = nil
			}
			continue
		}
		w.status = h.status
		w.body, err = readBody(br, w.body[:0], h.length)
		w.err = err
		w.done <- struct{}{}
		if err != nil {
			c.fail(readError(err))
			return
		}
	}
}

func readBody(r io.Reader, buf []byte, n int) ([]byte, error) {
	buf = growTo(buf, n)
	_, err := io.ReadFull(r, buf)
	return buf, err
}

func growTo(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func readError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrClosed
	}
	return err
}

var heartbeatBody = []byte{'N'}

func (c *Conn) answerHeartbeat(id uint64) error {
	f := appendHeader(make([]byte, 0, headerLen+1), flagEvent, StatusOK, id)
	f = append(f, heartbeatBody...)
	finishFrame(f, 0)
	return c.write(f, time.Now().Add(c.heartbeat))
}

// keepAlive sends a heartbeat when the connection has been quiet for a
// heartbeat interval, and closes it when nothing came for three: a
// provider that vanished without a reset is noticed before calls time
// out on it.
func (c *Conn) keepAlive() {
	t := time.NewTicker(c.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case now := <-t.C:
			quiet := now.Sub(time.Unix(0, c.lastRead.Load()))
			if quiet >= 3*c.heartbeat {
				c.fail(errors.New("dubbo: provider silent for three heartbeats"))
				return
			}
			if quiet >= c.heartbeat {
				f := appendHeader(make([]byte, 0, headerLen+1), flagRequest|flagTwoWay|flagEvent, 0, c.nextID.Add(1))
				f = append(f, heartbeatBody...)
				finishFrame(f, 0)
				if err := c.write(f, now.Add(c.heartbeat)); err != nil {
					c.fail(err)
					return
				}
			}
		}
	}
}
