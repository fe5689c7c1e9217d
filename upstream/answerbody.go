package upstream

import (
	"bufio"
	"cmp"
	"errors"
	"io"
	"net"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/valyala/fasthttp"
)

// DefaultAnswerWindow is how much of an answer's body the gateway holds
// when a service does not say (answer_window): an answer up to it is read
// whole, as every feature that looks at a body expects; a longer one
// streams.
const DefaultAnswerWindow = 512 << 10

// answerTrailerBytes bounds the trailer fields of a chunked answer that
// streams: they are read, checked and dropped.
const answerTrailerBytes = 8 << 10

// errAnswerTooLarge is an answer that streamed past max_response_bytes:
// found after its header went to the client, so the client's connection
// closes with the answer cut short.
var errAnswerTooLarge = errors.New("upstream: answer body exceeds max_response_bytes")

// answerBody is the rest of an answer whose body is longer than the pool's
// window: read from the backend's connection only as the transport writes
// it to the client. A client that stops reading stops the gateway
// reading, the backend's socket fills and the backend is pushed back, so a
// response holds the connection's buffers and never the answer. Each read
// waits for the backend at most the pool's read timeout.
//
// It holds the connection (and a loop pool's slot) until the transport
// closes it: its owner then keeps the connection when the body was read
// to its end and nothing follows it, and closes it otherwise. A loop's
// pooled connection has one of its own, so streaming there allocates
// nothing.
type answerBody struct {
	br      *bufio.Reader
	conn    net.Conn // its read deadline is renewed at each read
	clock   func() time.Time
	readFor time.Duration
	window  int
	owner   streamOwner

	body codec.Body // fixed or chunked framing
	// pre is the start of a body whose length was not announced, read
	// while the answer might still fit the window: it goes first.
	pre        []byte
	untilClose bool  // no framing: the body ends when the backend closes
	left       int64 // untilClose: bytes allowed before max_response_bytes
	reusable   bool  // the connection may carry a request once the body ended
	ended      bool
	err        error
	open       bool
	pacing     pacing
}

// streamOwner takes a connection back once the body streamed over it is
// closed: reuse says it may carry another request.
type streamOwner interface{ streamEnded(reuse bool) }

// on sets b up to read an answer from br, a reader of conn.
func (b *answerBody) on(br *bufio.Reader, conn net.Conn, clock func() time.Time, p *Pool, window int) {
	b.br, b.conn, b.clock, b.readFor, b.window = br, conn, clock, p.Read, window
}

// start makes b the body being streamed, for owner.
func (b *answerBody) start(owner streamOwner) {
	b.owner, b.open = owner, true
	b.pacing = pacing{window: cmp.Or(b.window, DefaultAnswerWindow)}
}

// Read implements io.Reader: the body as the backend sends it, decoded
// from its framing.
func (b *answerBody) Read(p []byte) (int, error) {
	if len(b.pre) > 0 {
		n := copy(p, b.pre)
		b.pre = b.pre[n:]
		return n, nil
	}
	switch {
	case b.ended:
		return 0, io.EOF
	case b.err != nil:
		return 0, b.err
	case len(p) == 0:
		return 0, nil
	}
	_ = b.conn.SetReadDeadline(b.clock().Add(b.readFor))
	var (
		n   int
		err error
	)
	if b.untilClose {
		if b.left <= 0 {
			b.err = errAnswerTooLarge
			return 0, b.err
		}
		n, err = b.br.Read(p[:min(int64(len(p)), b.left)])
		b.left -= int64(n)
	} else {
		n, err = b.body.Read(p)
	}
	b.pacing.took(n)
	switch {
	case err == io.EOF:
		b.ended = true
	case errors.Is(err, codec.ErrBodyTooLarge):
		b.err = errAnswerTooLarge
		err = b.err
	case err != nil:
		b.err = err
	}
	return n, err
}

// Close implements io.Closer: the owner keeps or closes the connection.
func (b *answerBody) Close() error {
	if !b.open {
		return nil
	}
	b.open = false
	reuse := b.ended && b.reusable && !b.untilClose && b.br.Buffered() == 0
	owner := b.owner
	b.detach() // a window's worth of start is not kept by an idle connection
	owner.streamEnded(reuse)
	return nil
}

// detach ends b without touching its connection: the exchange goes on
// with it (the body was read whole) or drops it (an error).
func (b *answerBody) detach() {
	b.open = false
	b.owner, b.pacing = nil, pacing{}
	if cap(b.pre) > keptPre {
		b.pre = nil
	}
	b.pre = b.pre[:0]
}

// Window is how much of the body the transport may write before the
// client must have taken it: each window the client takes renews the
// write timeout (transport.Paced).
func (b *answerBody) Window() int { return b.window }

// Pace makes the body call renew each time another window of it was read
// for the client: a transport that cannot renew its write timeout between
// its own writes (fasthttp's server, an HTTP/2 stream) renews it here, as
// the bytes read are the ones it writes next.
func (b *answerBody) Pace(renew func()) { b.pacing.renew = renew }

// pacing calls renew once per window of body read.
type pacing struct {
	renew  func()
	window int
	since  int
}

func (p *pacing) took(n int) {
	if p.renew == nil {
		return
	}
	if p.since += n; p.since >= p.window {
		p.since = 0
		p.renew()
	}
}

// keptPre is the largest start-of-body buffer a connection keeps for the
// next answer without a length.
const keptPre = 16 << 10

// readAnswer reads an answer from b's reader with fasthttp's parser: its
// header section (interim answers skipped, as ReadLimitBody does), then a
// body up to the window whole into resp, or the start of a longer one,
// whose rest is left to stream through b (streamed; the caller gives it
// its owner). A body with a Content-Length over max_response_bytes is
// refused before any of it is read. unframed reports a body that ended
// with the backend's close: the connection carries nothing more.
func readAnswer(b *answerBody, resp *fasthttp.Response, maxBody int) (streamed, unframed bool, err error) {
	if err = resp.Header.Read(b.br); err != nil {
		return false, false, err
	}
	for n := 0; interim(resp.StatusCode()); n++ {
		if n >= maxInterim {
			return false, false, errTooManyInterim
		}
		if err = resp.Header.Read(b.br); err != nil {
			return false, false, err
		}
	}
	if resp.SkipBody || noBody(resp.StatusCode()) {
		return false, false, nil
	}
	cl := resp.Header.ContentLength()
	switch {
	case cl >= 0 && cl > maxBody:
		return false, false, fasthttp.ErrBodyTooLarge
	case cl >= 0 && cl <= b.window:
		return false, false, resp.ReadBody(b.br, maxBody)
	case cl >= 0:
		b.body.StartFixed(b.br, int64(cl))
		b.untilClose = false
	case cl == -1: // chunked
		b.body.StartChunked(b.br, int64(maxBody), answerTrailerBytes)
		b.untilClose = false
	default: // read until the backend closes
		b.untilClose, b.left = true, int64(maxBody)
	}
	b.reusable, b.ended, b.err = !resp.ConnectionClose(), false, nil
	if cl >= 0 {
		resp.SetBodyStream(b, cl)
		return true, false, nil
	}
	// No length announced: read up to a window; a body that ends within
	// it is an answer like any other, held whole.
	whole, err := b.readStart(b.window)
	if err != nil || whole {
		unframed = b.untilClose
		if err == nil {
			resp.SetBody(b.pre) // a copy: b.pre stays the connection's
		}
		b.detach()
		return false, unframed, err
	}
	resp.SetBodyStream(b, -1)
	return true, false, nil
}

// readStart reads the body into b.pre until it ends (whole) or passes
// window bytes.
func (b *answerBody) readStart(window int) (whole bool, err error) {
	pre := b.pre[:0]
	for len(pre) <= window {
		if len(pre) == cap(pre) {
			grown := make([]byte, len(pre), min(max(2*cap(pre), 4<<10), window+1))
			copy(grown, pre)
			pre = grown
		}
		n, err := b.Read(pre[len(pre):cap(pre)])
		pre = pre[:len(pre)+n]
		if err == io.EOF {
			b.pre = pre
			return true, nil
		}
		if err != nil {
			b.pre = pre[:0]
			return false, err
		}
	}
	b.pre = pre
	return false, nil
}

// maxInterim bounds the interim (1xx) answers read before the final one,
// as fasthttp's client does.
const maxInterim = 16

var errTooManyInterim = errors.New("upstream: too many interim answers")

// interim reports an interim status that precedes the final answer (101
// is final: the protocol switches).
func interim(code int) bool {
	return code >= 100 && code < 200 && code != fasthttp.StatusSwitchingProtocols
}

// noBody reports a status whose answer has no body whatever its fields say.
func noBody(code int) bool {
	return code < 200 || code == fasthttp.StatusNoContent || code == fasthttp.StatusNotModified
}
