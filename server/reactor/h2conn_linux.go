//go:build linux

package reactor

import (
	"errors"
	"io"
	"os"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/tollgate/tollgate/server/transport"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HTTP/2 served on the loop that owns the connection. The connection's
// fiber reads its frames (h2read_linux.go) through the same read path as
// an HTTP/1.1 request's; each stream's request runs on a fiber of the same
// loop (h2stream_linux.go), and answers go out through one writer fiber at
// a time (h2write_linux.go). Only one fiber of a loop runs at a time, on
// the loop's goroutine, so the connection's state below needs no lock:
// everything but Drain and Abort runs on its loop.

// Bounds of what a client can make the connection hold or do.
const (
	// h2OutLimit is how many frame bytes may wait for the socket before
	// a stream writing more waits: with the streams' flow-control
	// windows, it bounds the connection's output.
	h2OutLimit = 256 << 10
	// h2MaxControl is how many answers to control frames (SETTINGS and
	// PING acks, resets) may wait unwritten before the connection is cut
	// (ENHANCE_YOUR_CALM): a client that floods them and reads nothing
	// gets no more queued (x/net's bound).
	h2MaxControl = 10000
	// h2MaxEmptyData bounds DATA frames without data or END_STREAM,
	// which cost a frame's work and move nothing (CVE-2019-9518).
	h2MaxEmptyData = 1000
	// h2MaxFrame is the largest DATA frame written, whatever the client
	// allows: larger ones hold a window's bytes per frame for nothing.
	h2MaxFrame = 64 << 10
	// h2FramesPerTurn is how many frames the reader acts on before the
	// loop serves its other connections.
	h2FramesPerTurn = 64
)

// h2Conn is one HTTP/2 connection on a loop.
type h2Conn struct {
	t   *reactorTransport
	c   *clientConn
	s   *evState
	srv *h2.Server
	o   *h2.Options

	rf      *http2.Framer // reads frames through the connection's reader
	dec     *hpack.Decoder
	block   headerBlock   // the header block being read (h2headers_linux.go)
	wf      *http2.Framer // writes frames into out
	blk     []byte        // a header block being encoded (hpackenc.AppendField)
	scratch []byte

	streams  map[uint32]*h2Stream
	maxSeen  uint32      // the highest stream the client opened
	open     int         // streams open or half-closed: the client's count
	handlers int         // streams whose fiber runs
	queued   []*h2Stream // streams waiting for a handler slot
	idleAt   bool        // the read phase is the idle timeout's
	settings bool        // the client's first SETTINGS came

	// Sending: the client's windows and frame size.
	sendWin     int64
	peerWin     int64 // SETTINGS_INITIAL_WINDOW_SIZE
	peerFrame   int
	connWaiters []*h2Stream // streams waiting for the connection's window

	// Receiving: what the client may still send on the connection, and
	// what handlers took that was not yet given back.
	recvWin     int64
	recvUnacked int64
	emptyData   int

	// The writer (h2write_linux.go).
	out, spare []byte
	writing    bool               // a writer fiber runs
	tlsOut     bool               // a fiber is inside a write to the TLS session
	outQ       pipeline.ParkQueue // waiting for room in out
	tlsQ       pipeline.ParkQueue // waiting for tlsOut
	doneQ      pipeline.ParkQueue // the reader, waiting for streams to end
	control    int                // control answers written since out was last empty

	writeFn func()                   // h.writeOut, bound once
	emitFn  func(name, value []byte) // h.emitField, bound once

	started   bool // the preface came: frames may be written
	goingAway bool // GOAWAY sent
	goAwayErr bool // for an error: the connection ends soon after: no new stream
	dead      bool // the connection failed: nothing more is read or written
	finished  bool

	// Rapid reset: streams whose handler ran, and of those the ones the
	// client reset before their answer.
	ran, resets int
}

// serveH2 serves c as an HTTP/2 connection on its loop, from its preface
// (in w's reader, or still in the socket) to its end; it reports false:
// the caller closes the connection.
func (t *reactorTransport) serveH2(c *clientConn, w *serveState) bool {
	h := &h2Conn{t: t, c: c, s: c.loop.ev, srv: t.h2, streams: make(map[uint32]*h2Stream)}
	o := t.h2.Limits()
	h.o = &o
	if !h.srv.Join(h) {
		return t.drop(c, w)
	}
	defer h.srv.Leave(h)
	c.h2 = h
	defer func() { c.h2 = nil }()
	h.writeFn, h.emitFn = h.writeOut, h.emitField
	h.sendWin, h.peerWin, h.peerFrame = 65535, 65535, 16384
	h.recvWin = int64(o.ConnWindow)
	h.wf = http2.NewFramer((*h2Out)(h), nil)
	h.rf = http2.NewFramer(nil, w.br)
	h.rf.SetReuseFrames()
	h.rf.SetMaxReadFrameSize(16384)
	h.dec = hpack.NewDecoder(4096, h.onField)
	h.dec.SetMaxStringLength(int(h.headerListLimit()))

	c.readPhase(t.o.HeaderTimeout)
	if err := readPreface(w); err != nil {
		return t.drop(c, w)
	}
	h.started = true
	_ = h.wf.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: o.MaxConcurrentStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(o.StreamWindow)},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: h.headerListLimit()},
	)
	if more := o.ConnWindow - 65535; more > 0 {
		_ = h.wf.WriteWindowUpdate(0, uint32(more))
	}
	h.kick()
	h.readFrames()
	h.finish()
	return false
}

// headerListLimit is SETTINGS_MAX_HEADER_LIST_SIZE: the header-list
// limit, with room for ten fields' overhead (as x/net advertises it).
func (h *h2Conn) headerListLimit() uint32 {
	return uint32(h.o.MaxHeaderListBytes + 10*32)
}

// readPreface reads the client's connection preface.
func readPreface(w *serveState) error {
	b, err := w.br.Peek(len(transport.ClientPreface))
	if err != nil {
		return err
	}
	if string(b) != transport.ClientPreface {
		return errors.New("h2: bad preface")
	}
	_, _ = w.br.Discard(len(b))
	return nil
}

// finish ends the connection: the streams still running are told it is
// gone, and the reader waits until their fibers and the writer are done,
// since they use the connection.
func (h *h2Conn) finish() {
	f := h.s.cur
	if !h.dead {
		// What was written (a GOAWAY, the last answers) goes out first,
		// within the write timeout, or a second after a GOAWAY for an
		// error (x/net's grace); the connection then closes gracefully
		// (clientConn.finish), not with a shut socket.
		grace := h.writeTimeout()
		if h.goAwayErr {
			grace = time.Second
		}
		until := h.t.now() + int64(grace)
		for h.writing && !h.dead {
			left := time.Duration(until - h.t.now())
			if left <= 0 {
				break
			}
			h.park(f, &h.doneQ, left)
		}
		if h.writing {
			h.fail()
		}
		h.stop()
	}
	for h.handlers > 0 || h.writing {
		h.park(f, &h.doneQ, time.Hour)
	}
	h.finished = true
}

// park parks f in q for at most d, as Fiber.Park; a loop that is stopping
// ends the connection instead (its waits would otherwise go on).
func (h *h2Conn) park(f *fiber, q *pipeline.ParkQueue, d time.Duration) bool {
	if h.s.stopping.Load() {
		h.fail()
		return false
	}
	woken := f.Park(q, d)
	if h.s.stopping.Load() {
		h.fail()
	}
	return woken
}

// fail marks the connection dead and shuts its socket, so that the
// writer's wait ends too.
func (h *h2Conn) fail() {
	if h.dead {
		return
	}
	h.c.shutdownSocket()
	h.stop()
}

// stop marks the connection dead: every stream waiting for its client
// wakes to find it gone.
func (h *h2Conn) stop() {
	if h.dead {
		return
	}
	h.dead = true
	for _, st := range h.streams {
		st.gone = true
		st.q.WakeOne()
	}
	for i, st := range h.queued {
		delete(h.streams, st.id)
		h.open -= st.counted()
		st.release()
		h.queued[i] = nil
	}
	h.queued = h.queued[:0]
	for h.outQ.WakeOne() {
	}
	for h.tlsQ.WakeOne() {
	}
}

// Drain implements h2.LoopConn: GOAWAY, then the connection closes once
// its streams are answered. It runs on the loop.
func (h *h2Conn) Drain() {
	h.s.post(evPost{fn: func() {
		if h.finished || h.dead {
			return
		}
		if !h.started {
			// Still waiting for the preface: nothing to answer.
			h.c.shutdownSocket()
			return
		}
		h.goAway(http2.ErrCodeNo)
		h.endIfIdle()
	}})
}

// Abort implements h2.LoopConn.
func (h *h2Conn) Abort() { h.c.shutdownSocket() }

// goAway sends GOAWAY once: the streams the client opened so far are
// answered, no later one is.
func (h *h2Conn) goAway(code http2.ErrCode) {
	if h.goingAway || h.dead {
		return
	}
	h.goingAway = true
	h.goAwayErr = code != http2.ErrCodeNo
	_ = h.wf.WriteGoAway(h.maxSeen, code, nil)
	h.kick()
}

// endIfIdle ends a connection that sent GOAWAY once nothing runs on it:
// the reader, waiting for frames, is woken to close it.
func (h *h2Conn) endIfIdle() {
	if h.goingAway && h.handlers == 0 && len(h.queued) == 0 {
		h.wakeReader(0)
	}
}

// wakeReader brings the reader's wait for frames to an end at deadline
// (transport clock), 0 for now, unless it ends sooner.
func (h *h2Conn) wakeReader(deadline int64) {
	f := h.c.fiber
	if f == nil || f.waitIO != &h.c.io || f.waitW {
		return
	}
	s := h.s
	if deadline == 0 {
		s.timers.remove(f)
		f.unwait()
		f.timedOut = true
		f.queued = true
		s.ready = append(s.ready, f)
		return
	}
	if f.heapAt < 0 || deadline < f.deadline {
		s.timers.remove(f)
		f.deadline = deadline
		s.timers.push(f)
	}
}

// idle reports no stream open or running.
func (h *h2Conn) idle() bool {
	return h.open == 0 && h.handlers == 0 && len(h.queued) == 0
}

// armIdle starts the idle timeout when the connection has nothing open,
// and ends it when it has: the timeout runs from when it went idle, not
// from the last frame, so a client trickling frames that open nothing
// (empty CONTINUATIONs, PINGs) is still cut.
func (h *h2Conn) armIdle() {
	switch idle := h.idle(); {
	case idle && !h.idleAt:
		h.idleAt = true
		h.c.readPhase(h.idleTimeout())
	case !idle && h.idleAt:
		h.idleAt = false
		h.c.readPhase(0)
		h.c.rdl = 0
	}
}

func (h *h2Conn) idleTimeout() time.Duration {
	if h.o.IdleTimeout > 0 {
		return h.o.IdleTimeout
	}
	return h.t.idleWait
}

// refused counts a refusal as x/net names it.
func (h *h2Conn) refused(kind string, code http2.ErrCode, what string) {
	h.srv.Refused(kind, code, what)
}

// isTimeout reports a read that ended at its deadline.
func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

var _ io.Writer = (*h2Out)(nil)
