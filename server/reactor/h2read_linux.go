//go:build linux

package reactor

import (
	"errors"
	"math"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/server/h2"
	"golang.org/x/net/http2"
)

// errConnProtocol and its kin end the connection with a GOAWAY of their code.
type h2ConnError struct {
	code http2.ErrCode
	what string // the refusal's name
}

func (e h2ConnError) Error() string { return "h2: " + e.what }

// readFrames reads and acts on the client's frames until the connection
// ends: the client leaves, breaks the protocol, stays idle too long, or
// the connection drained after a GOAWAY.
func (h *h2Conn) readFrames() {
	f := h.s.cur
	for n := 0; !h.dead; n++ {
		if h.goingAway && h.idle() {
			return
		}
		if n == h2FramesPerTurn {
			// A client that keeps its socket full would keep the loop
			// reading its frames: the loop serves its other connections'
			// events before the next ones.
			n = 0
			f.sleep(0)
		}
		h.armIdle()
		fr, err := h.rf.ReadFrame()
		if err != nil {
			var se http2.StreamError
			var ce http2.ConnectionError
			switch {
			case errors.As(err, &se):
				h.noteSeen(se.StreamID)
				h.refused("stream", se.Code, "bad_frame")
				h.resetStream(se.StreamID, se.Code)
				continue
			case errors.As(err, &ce):
				h.refused("conn", http2.ErrCode(ce), "bad_frame")
				h.goAway(http2.ErrCode(ce))
			case isTimeout(err) && (h.idle() || h.goingAway):
				h.goAway(http2.ErrCodeNo) // idle: said politely
			default:
				h.fail()
			}
			return
		}
		if err := h.process(fr); err != nil {
			var ce h2ConnError
			if errors.As(err, &ce) {
				h.refused("conn", ce.code, ce.what)
				h.goAway(ce.code)
			}
			return
		}
	}
}

// process acts on one frame.
func (h *h2Conn) process(f http2.Frame) error {
	if !h.settings {
		// The preface ends with the client's SETTINGS (RFC 9113 §3.4).
		if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
			return h2ConnError{http2.ErrCodeProtocol, "no_settings"}
		}
		h.settings = true
	}
	switch f := f.(type) {
	case *http2.HeadersFrame:
		return h.startBlock(f)
	case *http2.ContinuationFrame:
		return h.blockFragment(f.HeaderBlockFragment(), f.HeadersEnded(), false)
	case *http2.DataFrame:
		return h.onData(f)
	case *http2.SettingsFrame:
		return h.onSettings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			_ = h.wf.WritePing(true, f.Data)
			return h.controlAnswer()
		}
	case *http2.WindowUpdateFrame:
		return h.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		if h.idleStream(f.StreamID) {
			return h2ConnError{http2.ErrCodeProtocol, "reset_idle_stream"}
		}
		if st := h.streams[f.StreamID]; st != nil {
			st.reset, st.clientReset = true, true
			h.closeStream(st)
		}
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			h.refused("stream", http2.ErrCodeProtocol, "priority_on_self")
			h.resetStream(f.StreamID, http2.ErrCodeProtocol)
		}
	case *http2.GoAwayFrame:
		// The client opens nothing more: what runs is answered, then
		// the connection closes.
		h.goAway(http2.ErrCodeNo)
	case *http2.PushPromiseFrame:
		return h2ConnError{http2.ErrCodeProtocol, "push_promise"}
	}
	return nil
}

// idleStream reports a client stream never opened (RFC 9113 §5.1: frames
// other than HEADERS and PRIORITY on one are a connection error).
func (h *h2Conn) idleStream(id uint32) bool {
	return id%2 == 1 && id > h.maxSeen
}

func (h *h2Conn) noteSeen(id uint32) {
	if id%2 == 1 && id > h.maxSeen {
		h.maxSeen = id
	}
}

// onHeaders opens a stream with a request, or ends one with trailers.
func (h *h2Conn) onHeaders(f *headerBlock) error {
	id := f.id
	if st := h.streams[id]; st != nil {
		// Trailers: they end the body. They are not passed on (an
		// HTTP/1.1 backend would need the body chunked for them).
		if !st.remoteOpen {
			h.resetStream(id, http2.ErrCodeStreamClosed)
			return nil
		}
		if !f.endStream {
			h.refused("stream", http2.ErrCodeProtocol, "trailers_not_ended")
			h.resetStream(id, http2.ErrCodeProtocol)
			return nil
		}
		h.endBody(st)
		return nil
	}
	if id%2 == 0 || id <= h.maxSeen {
		return h2ConnError{http2.ErrCodeProtocol, "headers_on_closed_stream"}
	}
	h.maxSeen = id
	if h.goingAway {
		return nil // after GOAWAY's last stream: not served (RFC 9113 §6.8)
	}
	if f.hasPrio && f.priority.StreamDep == id {
		h.refused("stream", http2.ErrCodeProtocol, "priority_on_self")
		h.resetStream(id, http2.ErrCodeProtocol)
		return nil
	}
	if h.open >= int(h.o.MaxConcurrentStreams) {
		h.refused("stream", http2.ErrCodeRefusedStream, "over_max_streams")
		h.resetStream(id, http2.ErrCodeRefusedStream)
		return nil
	}
	st := newH2Stream(h, id)
	var err error
	st.head, st.info, err = h2.AppendHead(st.head[:0], f.fields, f.endStream, h.o)
	if errors.Is(err, h2.ErrMalformed) {
		st.release()
		h.refused("stream", http2.ErrCodeProtocol, "malformed_request")
		h.resetStream(id, http2.ErrCodeProtocol)
		return nil
	}
	st.failed = err
	if f.truncated {
		st.failed = codec.ErrHeaderTooLarge
	}
	st.remoteOpen = !f.endStream
	st.ended = f.endStream
	h.streams[id] = st
	h.open++
	st.inOpen = true
	return h.schedule(st)
}

// schedule starts st's handler, or queues it while MaxConcurrentStreams
// handlers run: streams the client reset free their slot in the
// protocol's count at once, their handlers only once they return, and a
// client resetting faster than they return fills the queue and is cut
// (x/net's rapid-reset bound, CVE-2023-44487).
func (h *h2Conn) schedule(st *h2Stream) error {
	limit := int(h.o.MaxConcurrentStreams)
	if h.handlers < limit {
		h.start(st)
		return nil
	}
	if len(h.queued) >= 4*limit {
		return h2ConnError{http2.ErrCodeEnhanceYourCalm, "too_many_early_resets"}
	}
	h.queued = append(h.queued, st)
	return nil
}

// start runs st's handler on a fiber of the loop, once the running one
// yields.
func (h *h2Conn) start(st *h2Stream) {
	h.handlers++
	g := h.s.takeFiber()
	st.fiber = g
	g.job = st.run
	g.queued = true
	h.s.ready = append(h.s.ready, g)
}

// onData takes a request body's bytes, within the windows the gateway
// opened.
func (h *h2Conn) onData(f *http2.DataFrame) error {
	id := f.StreamID
	n := int64(f.Header().Length) // padding included: it counts against the windows
	if n > h.recvWin {
		return h2ConnError{http2.ErrCodeFlowControl, "conn_window_exceeded"}
	}
	h.recvWin -= n
	st := h.streams[id]
	if st == nil || !st.remoteOpen {
		h.giveBack(nil, n) // nobody reads it
		if h.idleStream(id) {
			return h2ConnError{http2.ErrCodeProtocol, "data_on_idle_stream"}
		}
		h.resetStream(id, http2.ErrCodeStreamClosed)
		return nil
	}
	if n > st.recvWin {
		h.giveBack(nil, n)
		h.refused("stream", http2.ErrCodeFlowControl, "stream_window_exceeded")
		st.failBody(http2.ErrCodeFlowControl)
		return nil
	}
	st.recvWin -= n
	data := f.Data()
	if pad := n - int64(len(data)); pad > 0 {
		h.giveBack(st, pad)
	}
	if len(data) == 0 && !f.StreamEnded() {
		if h.emptyData++; h.emptyData > h2MaxEmptyData {
			return h2ConnError{http2.ErrCodeEnhanceYourCalm, "empty_data_flood"}
		}
	}
	st.received += int64(len(data))
	if cl := st.info.ContentLength; cl >= 0 && st.received > cl {
		h.giveBack(nil, int64(len(data)))
		h.refused("stream", http2.ErrCodeProtocol, "data_past_content_length")
		st.failBody(http2.ErrCodeProtocol)
		return nil
	}
	st.in = append(st.in, data...)
	if f.StreamEnded() {
		h.endBody(st)
		return nil
	}
	st.q.WakeOne()
	return nil
}

// endBody notes the end of st's request body.
func (h *h2Conn) endBody(st *h2Stream) {
	if cl := st.info.ContentLength; cl >= 0 && st.received != cl {
		h.refused("stream", http2.ErrCodeProtocol, "content_length_mismatch")
		st.failBody(http2.ErrCodeProtocol)
		return
	}
	st.remoteOpen = false
	st.ended = true
	st.q.WakeOne()
}

// onSettings applies the client's settings and acknowledges them.
func (h *h2Conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				return h2ConnError{http2.ErrCode(ce), "bad_setting"}
			}
			return h2ConnError{http2.ErrCodeProtocol, "bad_setting"}
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			// Every stream's window moves by the change (RFC 9113 §6.9.2).
			delta := int64(s.Val) - h.peerWin
			h.peerWin = int64(s.Val)
			for _, st := range h.streams {
				st.sendWin += delta
				if st.sendWin > math.MaxInt32 {
					return h2ConnError{http2.ErrCodeFlowControl, "window_overflow"}
				}
				st.wakeForWindow()
			}
		case http2.SettingMaxFrameSize:
			h.peerFrame = min(int(s.Val), h2MaxFrame)
		}
		return nil
	})
	if err != nil {
		return err
	}
	_ = h.wf.WriteSettingsAck()
	return h.controlAnswer()
}

// onWindowUpdate opens a window the client had shut.
func (h *h2Conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if h.sendWin += inc; h.sendWin > math.MaxInt32 {
			return h2ConnError{http2.ErrCodeFlowControl, "window_overflow"}
		}
		for i, st := range h.connWaiters {
			st.wakeForWindow()
			h.connWaiters[i] = nil
		}
		h.connWaiters = h.connWaiters[:0]
		return nil
	}
	if h.idleStream(f.StreamID) {
		return h2ConnError{http2.ErrCodeProtocol, "window_update_idle_stream"}
	}
	st := h.streams[f.StreamID]
	if st == nil {
		return nil // closed meanwhile: allowed
	}
	if st.sendWin += inc; st.sendWin > math.MaxInt32 {
		h.refused("stream", http2.ErrCodeFlowControl, "window_overflow")
		h.resetStream(st.id, http2.ErrCodeFlowControl)
		st.reset = true
		h.closeStream(st)
		return nil
	}
	st.wakeForWindow()
	return nil
}

// controlAnswer counts an answer to a control frame queued for the
// client; past h2MaxControl unwritten, the client is flooding.
func (h *h2Conn) controlAnswer() error {
	h.kick()
	if h.control++; h.control > h2MaxControl {
		return h2ConnError{http2.ErrCodeEnhanceYourCalm, "over_max_control_frames"}
	}
	return nil
}

// resetStream sends RST_STREAM for id.
func (h *h2Conn) resetStream(id uint32, code http2.ErrCode) {
	if h.dead {
		return
	}
	_ = h.wf.WriteRSTStream(id, code)
	if err := h.controlAnswer(); err != nil {
		h.refused("conn", http2.ErrCodeEnhanceYourCalm, "over_max_control_frames")
		h.fail()
	}
}
