package upstream

import (
	"bufio"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/hpackenc"
	"github.com/tollgate/tollgate/pipeline"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// Unary gRPC calls made on the request's event loop, over h2c: one
// HTTP/2 connection per loop and instance, used only by that loop's
// requests, which take turns at it instead of handing the call to
// grpc-go's goroutines (a goroutine per call, its codec and transport
// between). Only one fiber of a loop runs at a time, so the connection's
// state needs no lock. Nobody reads the connection for its own sake: the
// first call waiting for its answer reads frames, hands each call its
// own, and when its own is done passes the reading to a call still
// waiting. Writes take a turn too (a write that waits for the socket
// parks its fiber, never the loop).
//
// A backend over TLS is reached the same way (grpcloop_tls.go). A request
// message goes as far as the backend's windows let it, and its call sends
// the rest as they open (the reader wakes it on WINDOW_UPDATE).

// grpcLoopConn is one connection to a gRPC instance (h2c, or h2 over
// TLS), of one loop.
type grpcLoopConn struct {
	in   *Instance
	conn net.Conn // the TLS session over raw, or raw itself
	raw  net.Conn // the socket
	br   *bufio.Reader
	dec  *hpack.Decoder
	tls  grpcLoopTLS
	// tlsKey is the TLS configuration it was made with (tls.on says
	// there was one).
	tlsKey string

	// Writing (grpcloop_write.go): frames wait in out for the request
	// that writes; flight is the write under way.
	out, flight []byte
	flushing    bool
	table       hpackenc.Table             // the backend's decoder's, as the gateway fills it
	fixed       map[string]grpcFixedFields // a method's fixed header fields, encoded
	hbuf        []byte                     // a header block being encoded
	lower       []byte                     // a field name in lower case
	num         []byte                     // a grpc-timeout value

	dialing  bool               // the connection is being made
	dialWait pipeline.ParkQueue // calls waiting for it
	nextID   uint32
	calls    map[uint32]*grpcLoopCall
	spare    []*grpcLoopCall // finished calls, for the next ones
	maxCalls int             // the backend's SETTINGS_MAX_CONCURRENT_STREAMS
	slots    pipeline.ParkQueue
	reading  bool
	block    grpcLoopBlock // the header block being read

	// Sending: the backend's windows and frame size.
	sendWin  int64 // the connection's
	peerWin  int64 // a new stream's (SETTINGS_INITIAL_WINDOW_SIZE)
	maxFrame int
	// Receiving: bytes taken and not yet given back to the backend.
	unacked int64
	// Control frames owed to the backend, written with the next write.
	owe grpcLoopOwed

	err    error // the connection is dead: every call on it fails with this
	goAway bool  // the backend said GOAWAY: no new call
	closed atomic.Bool
}

type grpcLoopOwed struct {
	settingsAck bool
	pings       [][8]byte
	connWindow  uint32
	streams     []streamWindow
	resets      []uint32
}

type streamWindow struct{ id, n uint32 }

// grpcLoopCall is one call on a grpcLoopConn.
type grpcLoopCall struct {
	id      uint32
	q       pipeline.ParkQueue // the call's fiber, while it waits
	waiting bool
	done    bool
	limit   int
	// metadata says the answer's header and trailer metadata are kept.
	metadata bool

	headers bool // its HEADERS came
	status  int  // :status
	header  metadata.MD
	trailer metadata.MD
	code    codes.Code
	message string
	body    []byte
	recvd   uint32 // DATA taken since the last stream WINDOW_UPDATE

	// The request message being sent: its gRPC prefix and bytes (the
	// caller's, until the call returns), how much of both went, and the
	// stream's window for the rest.
	prefix  [5]byte
	msg     []byte
	sent    int
	sendWin int64
	reset   bool // a RST_STREAM is owed or went
}

// Windows the gateway opens for the backend's answers: a stream's and
// the connection's, given back as they are taken.
const (
	grpcLoopStreamWindow = 1 << 20
	grpcLoopConnWindow   = 16 << 20
)

// grpcLoopMaxStreamID is the last stream a client may open on a
// connection; past it a new connection is dialed.
const grpcLoopMaxStreamID = 1<<31 - 1

var errGRPCLoopClosed = errors.New("grpc: connection closed")

// grpcLoopFor returns the instance's live connection of c's loop,
// dialing one when there is none (or it died, or the backend is leaving
// it). Calls that come while it is being dialed wait for that one.
func (in *Instance) grpcLoopFor(c *pipeline.Ctx, deadline time.Time, t *GRPCTLS) (*grpcLoopConn, error) {
	slot := &in.grpcLoops[c.Loop.ID()]
	if cc := slot.Load(); cc != nil && cc.err == nil && !cc.goAway && cc.nextID < grpcLoopMaxStreamID && cc.madeWith(t) {
		for cc.dialing {
			if !c.Loop.Park(&cc.dialWait, time.Until(deadline)) && cc.dialing {
				return nil, errGRPCTimeout
			}
		}
		if cc.err == nil {
			return cc, nil
		}
		return nil, cc.err
	}
	cc := &grpcLoopConn{in: in, nextID: 1, calls: map[uint32]*grpcLoopCall{},
		maxCalls: 100, sendWin: 65535, peerWin: 65535, maxFrame: 16384, dialing: true}
	old := slot.Swap(cc)
	if old != nil {
		old.retire()
	}
	err := cc.dial(c.Loop, t)
	cc.dialing = false
	for cc.dialWait.WakeOne() {
	}
	if err != nil {
		cc.err = err
		return nil, err
	}
	return cc, nil
}

// dial connects (with TLS when t is set) and says what the gateway's side
// of the connection is.
func (cc *grpcLoopConn) dial(loop pipeline.Loop, t *GRPCTLS) error {
	in := cc.in
	conn, err := loop.Dial(in.Addr, in.pool.Connect)
	if err != nil {
		return err
	}
	cc.raw, cc.conn = conn, conn
	if t != nil {
		if err := cc.handshake(loop, t); err != nil {
			cc.close()
			return err
		}
	}
	// Large enough to hold the largest frame the gateway reads, which is
	// read in place.
	cc.br = bufio.NewReaderSize(cc.conn, 2*grpcLoopReadFrame)
	cc.dec = hpack.NewDecoder(4096, cc.onField)
	cc.dec.SetMaxStringLength(grpcLoopHeaderList)
	cc.fixed = map[string]grpcFixedFields{}
	_ = cc.conn.SetWriteDeadline(loop.Now().Add(in.pool.Connect))
	if err := cc.writeSession(loop, appendPreface(nil)); err != nil {
		cc.close()
		return err
	}
	return nil
}

// retire closes a connection replaced by another once its calls are done
// (at once when it has none).
func (cc *grpcLoopConn) retire() {
	cc.goAway = true
	if len(cc.calls) == 0 && !cc.dialing {
		cc.close()
	}
}

// close closes the socket. A TLS session is not closed through its
// tls.Conn: that would wait for a writer parked inside it (a lock, which a
// fiber must never wait on); the writer's write fails instead.
func (cc *grpcLoopConn) close() {
	if cc.raw != nil && !cc.closed.Swap(true) {
		_ = cc.raw.Close()
	}
}

// loopCallResult is what a call on the loop came to.
type loopCallResult struct {
	code            codes.Code
	message         string
	reply           []byte
	header, trailer metadata.MD
}

// grpcOnLoop makes a unary call to method with msg (serialized) and md on
// c's loop. ok is false when the call cannot be made there (the caller
// makes it through grpc-go); err is a deadline that passed.
func (in *Instance) grpcOnLoop(c *pipeline.Ctx, method string, msg []byte, deadline time.Time, keepMetadata bool, t *GRPCTLS) (r loopCallResult, ok bool, err error) {
	if c.Loop == nil || c.Loop.ID() < 0 || c.Loop.ID() >= maxLoopPools {
		return r, false, nil
	}
	if !in.grpcOnLoops.Load() {
		in.grpcOnLoops.Store(true)
	}
	cc, err := in.grpcLoopFor(c, deadline, t)
	if errors.Is(err, errGRPCTimeout) {
		return r, true, err
	}
	if err != nil {
		return loopCallResult{code: codes.Unavailable, message: "connection to " + in.Addr + " failed: " + err.Error()}, true, nil
	}
	for len(cc.calls) >= cc.maxCalls {
		if !c.Loop.Park(&cc.slots, time.Until(deadline)) && !time.Now().Before(deadline) {
			return r, true, errGRPCTimeout
		}
		if cc.err != nil || cc.goAway {
			return in.grpcOnLoop(c, method, msg, deadline, keepMetadata, t)
		}
	}
	call := cc.newCall(in.pool.MaxResponseBytes, keepMetadata)
	defer cc.forget(call)
	if err := cc.send(c, call, method, msg, deadline); err != nil {
		if errors.Is(err, errGRPCTimeout) {
			return r, true, err
		}
		cc.fail(err)
		return cc.failure(err), true, nil
	}
	for !call.done {
		if cc.err != nil {
			return cc.failure(cc.err), true, nil
		}
		if now := c.Loop.Now(); now.After(deadline) {
			cc.reset(call)
			cc.flushOwed(c.Loop, now)
			return r, true, errGRPCTimeout
		}
		if cc.sending(call) {
			// The backend opened its windows for more of the message.
			cc.appendData(call)
			if err := cc.flushOut(c.Loop, false, deadline); err != nil {
				return cc.failure(err), true, nil
			}
			continue
		}
		if !cc.reading {
			cc.readFor(c.Loop, call, deadline)
			continue
		}
		call.waiting = true
		c.Loop.Park(&call.q, deadline.Sub(c.Loop.Now()))
		call.waiting = false
	}
	if (call.code == codes.DeadlineExceeded || call.code == codes.Canceled) && deadline.Sub(c.Loop.Now()) < grpcLoopDeadlineSlack {
		// The backend ended the call at the grpc-timeout it was given,
		// a moment before the gateway's own deadline: a timeout as any.
		return r, true, errGRPCTimeout
	}
	return loopCallResult{code: call.code, message: call.message, reply: call.body, header: call.header, trailer: call.trailer}, true, nil
}

// grpcLoopDeadlineSlack is how near its deadline a call the backend
// cancelled counts as timed out.
const grpcLoopDeadlineSlack = 50 * time.Millisecond

// grpcLoopSpareCalls bounds the finished calls a connection keeps for
// the next ones (with their answer buffers).
const grpcLoopSpareCalls = 64

// newCall takes a finished call to reuse, or makes one; keepMetadata says
// the caller reads the answer's header and trailer metadata (a passed-
// through call does, a transcoded one does not).
func (cc *grpcLoopConn) newCall(limit int, keepMetadata bool) *grpcLoopCall {
	if n := len(cc.spare); n > 0 {
		call := cc.spare[n-1]
		cc.spare = cc.spare[:n-1]
		*call = grpcLoopCall{limit: limit, metadata: keepMetadata, body: call.body[:0]}
		return call
	}
	return &grpcLoopCall{limit: limit, metadata: keepMetadata}
}

func (cc *grpcLoopConn) recycle(call *grpcLoopCall) {
	if len(cc.spare) < grpcLoopSpareCalls && cap(call.body) <= 64<<10 {
		cc.spare = append(cc.spare, call)
	}
}

// reset owes the backend the call's RST_STREAM, once.
func (cc *grpcLoopConn) reset(call *grpcLoopCall) {
	if !call.reset {
		call.reset = true
		cc.owe.resets = append(cc.owe.resets, call.id)
	}
}

// failure is a call the connection's end cut.
func (cc *grpcLoopConn) failure(err error) loopCallResult {
	return loopCallResult{code: codes.Unavailable, message: "connection to " + cc.in.Addr + " lost: " + err.Error()}
}

// forget takes a call off the connection and gives its place to a call
// waiting for one.
func (cc *grpcLoopConn) forget(call *grpcLoopCall) {
	if call.id == 0 {
		cc.recycle(call)
		return // never sent
	}
	delete(cc.calls, call.id)
	if call.sent < len(call.msg)+len(call.prefix) && cc.err == nil {
		// Answered before all of its message went: the stream is ended
		// from this side too.
		cc.reset(call)
	}
	call.msg = nil
	// Its caller copies what it needs of the answer before it yields,
	// and only a request that runs after it can take the call again.
	cc.recycle(call)
	cc.slots.WakeOne()
	if !cc.reading {
		// It may have been woken to read (readFor's hand-over) and be
		// leaving instead, its deadline past: another waiting call reads.
		cc.passReading()
	}
	if cc.goAway && len(cc.calls) == 0 {
		cc.close()
	}
}

// send adds the call's frames to the connection's outgoing ones and
// sees them written.
func (cc *grpcLoopConn) send(c *pipeline.Ctx, call *grpcLoopCall, method string, msg []byte, deadline time.Time) error {
	if cc.err != nil {
		return cc.err
	}
	cc.appendCall(c, call, method, msg, deadline.Sub(c.Loop.Now()))
	return cc.flushOut(c.Loop, true, deadline)
}
