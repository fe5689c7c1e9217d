package upstream

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/pipeline"
	"golang.org/x/net/http2"
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
// What it does not do, and leaves to grpc-go: TLS to the backend, and a
// request message larger than the window the backend opened (64 KiB
// unless it opens more): those calls go the other way.

// grpcLoopConn is one h2c connection to a gRPC instance, of one loop.
type grpcLoopConn struct {
	in    *Instance
	conn  net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	fr    *http2.Framer
	enc   *hpack.Encoder
	hbuf  bytes.Buffer // a header block being encoded
	dbuf  []byte       // a request message being framed
	lower []byte       // a metadata name in lower case

	dialing  bool               // the connection is being made
	dialWait pipeline.ParkQueue // calls waiting for it
	nextID   uint32
	calls    map[uint32]*grpcLoopCall
	spare    []*grpcLoopCall // finished calls, for the next ones
	maxCalls int             // the backend's SETTINGS_MAX_CONCURRENT_STREAMS
	slots    pipeline.ParkQueue
	reading  bool
	writing  bool
	writers  pipeline.ParkQueue

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
func (in *Instance) grpcLoopFor(c *pipeline.Ctx, deadline time.Time) (*grpcLoopConn, error) {
	slot := &in.grpcLoops[c.Loop.ID()]
	if cc := slot.Load(); cc != nil && cc.err == nil && !cc.goAway && cc.nextID < grpcLoopMaxStreamID {
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
	err := cc.dial(c.Loop)
	cc.dialing = false
	for cc.dialWait.WakeOne() {
	}
	if err != nil {
		cc.err = err
		return nil, err
	}
	return cc, nil
}

// dial connects and says what the gateway's side of the connection is.
func (cc *grpcLoopConn) dial(loop pipeline.Loop) error {
	in := cc.in
	conn, err := loop.Dial(in.Addr, in.pool.Connect)
	if err != nil {
		return err
	}
	cc.conn = conn
	cc.br = bufio.NewReaderSize(conn, 16<<10)
	cc.bw = bufio.NewWriterSize(conn, 16<<10)
	cc.fr = http2.NewFramer(cc.bw, cc.br)
	cc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	cc.fr.MaxHeaderListSize = 64 << 10
	cc.fr.SetMaxReadFrameSize(1 << 20)
	cc.enc = hpack.NewEncoder(&cc.hbuf)
	_ = conn.SetWriteDeadline(time.Now().Add(in.pool.Connect))
	_, _ = cc.bw.WriteString(http2.ClientPreface)
	_ = cc.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: grpcLoopStreamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: 64 << 10})
	_ = cc.fr.WriteWindowUpdate(0, grpcLoopConnWindow-65535)
	if err := cc.bw.Flush(); err != nil {
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

func (cc *grpcLoopConn) close() {
	if cc.conn != nil && !cc.closed.Swap(true) {
		_ = cc.conn.Close()
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
func (in *Instance) grpcOnLoop(c *pipeline.Ctx, method string, msg []byte, deadline time.Time, keepMetadata bool) (r loopCallResult, ok bool, err error) {
	if c.Loop == nil || c.Loop.ID() < 0 || c.Loop.ID() >= maxLoopPools {
		return r, false, nil
	}
	if !in.grpcOnLoops.Load() {
		in.grpcOnLoops.Store(true)
	}
	cc, err := in.grpcLoopFor(c, deadline)
	if errors.Is(err, errGRPCTimeout) {
		return r, true, err
	}
	if err != nil {
		return loopCallResult{code: codes.Unavailable, message: "connection to " + in.Addr + " failed: " + err.Error()}, true, nil
	}
	if need := int64(len(msg) + 5); need > cc.sendWin || need > cc.peerWin {
		return r, false, nil
	}
	for len(cc.calls) >= cc.maxCalls {
		if !c.Loop.Park(&cc.slots, time.Until(deadline)) && !time.Now().Before(deadline) {
			return r, true, errGRPCTimeout
		}
		if cc.err != nil || cc.goAway {
			return in.grpcOnLoop(c, method, msg, deadline, keepMetadata)
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
		if time.Now().After(deadline) {
			cc.owe.resets = append(cc.owe.resets, call.id)
			cc.flushOwed()
			return r, true, errGRPCTimeout
		}
		if !cc.reading {
			cc.readFor(call, deadline)
			continue
		}
		call.waiting = true
		c.Loop.Park(&call.q, time.Until(deadline))
		call.waiting = false
	}
	if (call.code == codes.DeadlineExceeded || call.code == codes.Canceled) && time.Until(deadline) < grpcLoopDeadlineSlack {
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

// send writes the call's HEADERS and its one DATA frame. The stream's
// number is taken, and its header block encoded, in the write's turn:
// streams must open in the order of their numbers, and the backend
// decodes header blocks in the order they arrive.
func (cc *grpcLoopConn) send(c *pipeline.Ctx, call *grpcLoopCall, method string, msg []byte, deadline time.Time) error {
	if !cc.takeTurn(c.Loop, deadline) {
		return errGRPCTimeout
	}
	defer cc.endTurn()
	if cc.err != nil {
		return cc.err
	}
	call.id = cc.nextID
	cc.nextID += 2
	cc.calls[call.id] = call
	cc.hbuf.Reset()
	for _, f := range [...]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: method},
		{Name: ":authority", Value: cc.in.Addr}, {Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"}, {Name: "user-agent", Value: "tollgate"},
		{Name: "grpc-timeout", Value: grpcTimeoutValue(time.Until(deadline))},
	} {
		_ = cc.enc.WriteField(f)
	}
	// The request's forwarding fields, as outgoingMetadata chooses them,
	// written without copies: never indexed, so the encoder's table keeps
	// no view of the request's buffer (their values change with every
	// request anyway).
	l := &c.Fields
	for i := range l.Len() {
		name, value := l.Field(i)
		if !grpcMetadataName(name) || !printable(value) {
			continue
		}
		cc.lower = cc.lower[:0]
		for _, b := range name {
			cc.lower = append(cc.lower, ascii.Lower(b))
		}
		_ = cc.enc.WriteField(hpack.HeaderField{Name: bytesconv.B2S(cc.lower), Value: bytesconv.B2S(value), Sensitive: true})
	}
	block := cc.hbuf.Bytes()
	first := true
	for len(block) > 0 || first {
		chunk := block[:min(len(block), cc.maxFrame)]
		block = block[len(chunk):]
		var err error
		if first {
			err = cc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: call.id, BlockFragment: chunk, EndHeaders: len(block) == 0})
			first = false
		} else {
			err = cc.fr.WriteContinuation(call.id, len(block) == 0, chunk)
		}
		if err != nil {
			return err
		}
	}
	cc.dbuf = append(cc.dbuf[:0], 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(cc.dbuf[1:], uint32(len(msg)))
	cc.dbuf = append(cc.dbuf, msg...)
	data := cc.dbuf
	for len(data) > 0 {
		chunk := data[:min(len(data), cc.maxFrame)]
		data = data[len(chunk):]
		if err := cc.fr.WriteData(call.id, len(data) == 0, chunk); err != nil {
			return err
		}
	}
	cc.sendWin -= int64(len(msg) + 5)
	cc.writeOwed()
	_ = cc.conn.SetWriteDeadline(deadline)
	return cc.bw.Flush()
}

// takeTurn waits for the connection's writes to be this request's (loop
// is the request's own: a Loop parks the request it belongs to).
func (cc *grpcLoopConn) takeTurn(loop pipeline.Loop, deadline time.Time) bool {
	for cc.writing {
		if !loop.Park(&cc.writers, time.Until(deadline)) && cc.writing {
			return false
		}
	}
	cc.writing = true
	return true
}

func (cc *grpcLoopConn) endTurn() {
	cc.writing = false
	cc.writers.WakeOne()
}

// flushOwed writes what is owed the backend now, if nobody is writing
// (the writer writes it with its own frames otherwise).
func (cc *grpcLoopConn) flushOwed() {
	if cc.writing || cc.err != nil {
		return
	}
	cc.writing = true
	cc.writeOwed()
	_ = cc.conn.SetWriteDeadline(time.Now().Add(time.Second))
	if err := cc.bw.Flush(); err != nil {
		cc.fail(err)
	}
	cc.endTurn()
}

func (cc *grpcLoopConn) writeOwed() {
	o := &cc.owe
	if o.settingsAck {
		_ = cc.fr.WriteSettingsAck()
		o.settingsAck = false
	}
	for _, p := range o.pings {
		_ = cc.fr.WritePing(true, p)
	}
	o.pings = o.pings[:0]
	if o.connWindow > 0 {
		_ = cc.fr.WriteWindowUpdate(0, o.connWindow)
		o.connWindow = 0
	}
	for _, s := range o.streams {
		_ = cc.fr.WriteWindowUpdate(s.id, s.n)
	}
	o.streams = o.streams[:0]
	for _, id := range o.resets {
		_ = cc.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	o.resets = o.resets[:0]
}

// grpcTimeoutValue is d as a grpc-timeout value: at most eight digits.
func grpcTimeoutValue(d time.Duration) string {
	ms := max(d.Milliseconds(), 1)
	if ms < 1e8 {
		return strconv.FormatInt(ms, 10) + "m"
	}
	return strconv.FormatInt(min(int64(d/time.Second), 99999999), 10) + "S"
}
