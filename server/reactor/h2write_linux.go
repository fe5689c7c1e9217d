//go:build linux

package reactor

import (
	"errors"
	"os"
	"slices"
	"time"

	"github.com/tollgate/tollgate/internal/hpackenc"
	"golang.org/x/net/http2"
)

// Frames are written into the connection's out buffer by whichever fiber
// has them (the reader's acks and resets, a stream's answer), each frame
// whole and in order, since no fiber yields while it appends; one writer
// fiber at a time sends what accumulated. It runs once the fibers ready
// now have run, so the frames of several streams answered in one round
// of the loop go out in one socket write. A TLS session never sees two
// writers: the writer holds tlsOut while inside it, and the reader, whose
// record processing may write an alert, hands bytes to it only while the
// writer is out (tlsSocket).

// h2Out is the frame writer's destination: the connection's out buffer.
type h2Out h2Conn

func (o *h2Out) Write(p []byte) (int, error) {
	h := (*h2Conn)(o)
	h.out = append(h.out, p...)
	return len(p), nil
}

// kick starts the writer, unless it runs or nothing waits.
func (h *h2Conn) kick() {
	if h.writing || h.dead || len(h.out) == 0 {
		return
	}
	h.writing = true
	g := h.s.takeFiber()
	g.job = h.writeFn
	g.queued = true
	h.s.ready = append(h.s.ready, g)
}

// writeOut runs on the writer fiber: it sends what accumulated until
// nothing is left, each write under the write timeout.
func (h *h2Conn) writeOut() {
	f, c := h.s.cur, h.c
	for len(h.out) > 0 && !h.dead {
		h.out, h.spare = h.spare[:0], h.out
		for h.tlsOut && !h.dead {
			h.park(f, &h.tlsQ, time.Hour)
		}
		if h.dead {
			break
		}
		h.tlsOut = true
		c.armWrite()
		_, err := c.Write(h.spare)
		h.tlsOut = false
		h.tlsQ.WakeOne()
		if err != nil {
			h.fail()
			break
		}
		if len(h.out) == 0 {
			h.control = 0
		}
		for h.outQ.WakeOne() {
		}
	}
	h.writing = false
	if cap(h.spare) > 2*h2OutLimit {
		h.spare = nil
	}
	h.doneQ.WakeOne()
}

// socketRead is the TLS session's read of the socket: the bytes are
// handed over only while no writer is inside the session (see above).
func (h *h2Conn) socketRead(p []byte) (int, error) {
	n, err := h.c.evRead(p)
	for h.tlsOut && !h.dead {
		h.park(h.s.cur, &h.tlsQ, time.Hour)
	}
	return n, err
}

// alertWrite is a write the TLS session makes while reading (an alert, a
// key update): it holds tlsOut, so the writer waits for it.
func (h *h2Conn) alertWrite(p []byte) (int, error) {
	c := h.c
	h.tlsOut = true
	c.wdl = c.loop.ev.clock + int64(h.writeTimeout())
	n, err := c.evWrite(p)
	h.tlsOut = false
	h.tlsQ.WakeOne()
	return n, err
}

func (h *h2Conn) writeTimeout() time.Duration {
	if h.o.WriteTimeout > 0 {
		return h.o.WriteTimeout
	}
	if h.t.o.WriteTimeout > 0 {
		return h.t.o.WriteTimeout
	}
	return 30 * time.Second
}

var errStreamGone = errors.New("h2: stream closed")

// waitRoom parks st's fiber while the out buffer is full.
func (h *h2Conn) waitRoom(st *h2Stream) error {
	for len(h.out) >= h2OutLimit {
		if h.dead || st.reset {
			return errStreamGone
		}
		h.kick()
		if !h.park(st.fiber, &h.outQ, h.writeTimeout()) && len(h.out) >= h2OutLimit {
			return os.ErrDeadlineExceeded
		}
	}
	if h.dead || st.reset {
		return errStreamGone
	}
	return nil
}

// sendable waits until st may send some of want bytes of DATA, within the
// client's windows and frame size, and takes them from the windows. The
// wait is bounded by the answer's write deadline, which each window the
// client takes renews (paceSent).
func (st *h2Stream) sendable(want int) (int, error) {
	h := st.h
	open, err := st.openWindow()
	if err != nil {
		return 0, err
	}
	n := min(int64(min(want, h.peerFrame)), open)
	st.sendWin -= n
	h.sendWin -= n
	return int(n), nil
}

// openWindow waits until st may send at least a byte of DATA (its window
// and the connection's both open) and reports how many, taking none: a
// streamed answer is read from the backend only as the client makes room
// for it, so a stream whose window stays shut holds no piece of it.
func (st *h2Stream) openWindow() (int64, error) {
	h := st.h
	for {
		if h.dead || st.reset {
			return 0, errStreamGone
		}
		if n := min(st.sendWin, h.sendWin); n > 0 {
			return n, nil
		}
		if h.sendWin <= 0 && !slices.Contains(h.connWaiters, st) {
			h.connWaiters = append(h.connWaiters, st)
		}
		left := time.Duration(st.writeUntil - h.t.now())
		if left <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		st.wantWindow = true
		h.park(st.fiber, &st.q, left)
		st.wantWindow = false
	}
}

// wakeForWindow wakes st's fiber if it waits for a window: a flood of
// WINDOW_UPDATEs does not make a stream waiting for its body run.
func (st *h2Stream) wakeForWindow() {
	if st.wantWindow {
		st.q.WakeOne()
	}
}

// paceSent notes n bytes of the answer sent: each window of them renews
// the write timeout, so a client that reads steadily is never cut and one
// that stops opening its windows is cut once one goes untaken for
// write_timeout.
func (st *h2Stream) paceSent(n, window int) {
	st.sinceRenew += n
	if st.sinceRenew >= window {
		st.sinceRenew = 0
		st.writeUntil = st.h.t.now() + int64(st.h.writeTimeout())
	}
}

// writeData sends p as DATA frames, the last with END_STREAM when end.
func (st *h2Stream) writeData(p []byte, end bool, window int) error {
	h := st.h
	for len(p) > 0 {
		if err := h.waitRoom(st); err != nil {
			return err
		}
		n, err := st.sendable(len(p))
		if err != nil {
			return err
		}
		_ = h.wf.WriteData(st.id, end && n == len(p), p[:n])
		h.kick()
		p = p[n:]
		st.paceSent(n, window)
	}
	return nil
}

// endData ends the stream with an empty DATA frame.
func (st *h2Stream) endData() error {
	h := st.h
	if err := h.waitRoom(st); err != nil {
		return err
	}
	_ = h.wf.WriteData(st.id, true, nil)
	h.kick()
	return nil
}

// writeBlock sends the header block in blk as HEADERS and CONTINUATION
// frames of the client's frame size.
func (h *h2Conn) writeBlock(id uint32, end bool) {
	blk := h.blk
	first := blk[:min(len(blk), h.peerFrame)]
	rest := blk[len(first):]
	_ = h.wf.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(rest) == 0})
	for len(rest) > 0 {
		n := min(len(rest), h.peerFrame)
		_ = h.wf.WriteContinuation(id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	h.kick()
}

// emitField adds an answer's field to the header block being encoded.
func (h *h2Conn) emitField(name, value []byte) {
	h.blk, h.scratch = hpackenc.AppendField(h.blk, h.scratch, name, value)
}
