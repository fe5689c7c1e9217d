package h2

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server/transport"
	"github.com/valyala/fasthttp"
)

var discardLog = log.New(io.Discard, "", 0)

// exchange is what serving one stream borrows: the request and answer in
// the transports' types, and the buffers the request is built in.
type exchange struct {
	req  fasthttp.Request
	resp fasthttp.Response
	head []byte // the request as HTTP/1.1: request line and header section
	body []byte // a body read whole, or the start of a streamed one
	hr   bytes.Reader
	br   *bufio.Reader
	keys []string
}

// ServeHTTP serves one stream: it rebuilds the request, has the handler
// answer it and writes the answer back.
func (c *conn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.streams.Add(1)
	if r.Context().Err() != nil {
		// Reset while it waited for a handler: no backend sees it.
		c.earlyReset()
		return
	}
	s := c.s
	x := s.exchanges.Get().(*exchange)
	defer s.exchanges.Put(x)
	req, resp := &x.req, &x.resp
	defer func() {
		req.Reset()
		resp.Reset()
	}()
	resp.Header.SetNoDefaultContentType(true)
	// The stream's context, released once its answer is written.
	pctx := pipeline.Acquire(req, resp)
	defer pipeline.Release(pctx)
	pctx.Peer = c.peer

	if err := x.build(r, &s.o); err != nil {
		if r.Context().Err() != nil {
			c.earlyReset()
			return
		}
		c.h.ServeError(err, pctx)
	} else {
		x.boundBy(w)
		// Its close-the-connection answer is HTTP/1.1's: a refused
		// request does not end the other streams (see draining below).
		c.h.Serve(pctx)
	}
	if up := pctx.Upgrade; up != nil {
		// A switch needs extended CONNECT, which is not offered; a
		// backend that switched anyway is not relayed.
		_ = up.Conn.Close()
		pctx.Upgrade = nil
	}
	if r.Context().Err() != nil {
		c.earlyReset()
		return
	}
	if isGRPC(r) && !isGRPCAnswer(resp) {
		grpcify(resp)
	}
	if d, ok := c.h.(interface{ Draining() bool }); ok && d.Draining() {
		// x/net turns this into a GOAWAY with the answer, as an HTTP/1.1
		// client gets Connection: close while the gateway drains.
		w.Header().Set("Connection", "close")
	}
	if p, ok := resp.BodyStream().(transport.Paced); ok && s.o.WriteTimeout > 0 && r.Method != http.MethodHead {
		// x/net gives the stream write_timeout for the whole answer; a
		// streamed one gets it per window the client takes, and a client
		// that stops (its flow-control window shut) is cut when it passes.
		rc, d := http.NewResponseController(w), s.o.WriteTimeout
		p.Pace(func() { _ = rc.SetWriteDeadline(time.Now().Add(d)) })
	}
	writeAnswer(w, resp, r.Method == http.MethodHead)
}

// build makes x.req the request r is, in the form an HTTP/1.1 client would
// have sent it, and reads its body (whole up to StreamBodyBytes).
func (x *exchange) build(r *http.Request, o *Options) error {
	// x/net has checked names (lowercase tokens), values (no CR, LF or
	// NUL), the pseudo-fields' presence, order and uniqueness, and refused
	// connection-specific fields; the request line's parts are checked
	// here, since a byte out of place in them would change the line.
	if r.Host == "" {
		return codec.ErrMissingHost
	}
	if !isToken(r.Method) || !isVisible(r.RequestURI) || !isVisible(r.Host) {
		return codec.ErrBadTarget
	}
	// Origin form only (RFC 9113 §8.3.1): an absolute :path would name a
	// host of its own beside :authority.
	if r.RequestURI[0] != '/' && (r.RequestURI != "*" || r.Method != http.MethodOptions) {
		return codec.ErrBadTarget
	}
	// (A Host field differing from :authority, or two of them, x/net has
	// reset the stream for; it drops the field otherwise. Were one to get
	// through, the head below would carry two Host fields, which the
	// gateway's checks refuse.)
	//
	if r.ContentLength > 0 && o.MaxBodyBytes > 0 && r.ContentLength > o.MaxBodyBytes {
		return codec.ErrBodyTooLarge
	}
	h := x.head[:0]
	h = append(h, r.Method...)
	h = append(h, ' ')
	h = append(h, r.RequestURI...)
	h = append(h, " HTTP/1.1\r\nHost: "...)
	h = append(h, r.Host...)
	h = append(h, "\r\n"...)
	// In a fixed order (a map's is random), so the same request always
	// reaches the backend the same way.
	x.keys = x.keys[:0]
	for k := range r.Header {
		x.keys = append(x.keys, k)
	}
	slices.Sort(x.keys)
	for _, k := range x.keys {
		for _, v := range r.Header[k] {
			if !validValue(v) {
				return codec.ErrBadHeaderValue
			}
			// As an HTTP/1.1 parser trims a value's surrounding
			// whitespace (which RFC 9113 §8.2.1 does not allow h2 to
			// send), and each cookie's, which x/net joined with "; ".
			v = strings.Trim(v, " \t")
			if k == "Cookie" && strings.Contains(v, ";") {
				v = trimCookies(v)
			}
			h = append(h, k...)
			h = append(h, ": "...)
			h = append(h, v...)
			h = append(h, "\r\n"...)
		}
	}

	// The body: with END_STREAM on the HEADERS frame there is none.
	var streamed io.Reader
	body := x.body[:0]
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		body, streamed, err = readStart(r.Body, body, o)
		x.body = body
		if err != nil {
			return err
		}
	}
	// x/net checks a declared length against the DATA frames that come,
	// not against none at all (END_STREAM on the headers): a body read
	// whole must be as long as declared, as one cut short over HTTP/1.1
	// is refused.
	declared, hasLength := r.Header["Content-Length"]
	if hasLength && streamed == nil && (len(declared) != 1 || declared[0] != strconv.Itoa(len(body))) {
		return codec.ErrBadContentLength
	}
	switch {
	case streamed != nil && !hasLength:
		h = append(h, "Transfer-Encoding: chunked\r\n"...)
	case streamed == nil && !hasLength && len(body) > 0:
		h = append(h, "Content-Length: "...)
		h = strconv.AppendInt(h, int64(len(body)), 10)
		h = append(h, "\r\n"...)
	}
	h = append(h, "\r\n"...)
	x.head = h

	if x.br == nil {
		x.br = bufio.NewReaderSize(nil, 4096)
	}
	x.hr.Reset(h)
	x.br.Reset(&x.hr)
	if len(h) > x.br.Size() {
		x.br = bufio.NewReaderSize(nil, len(h))
		x.br.Reset(&x.hr)
	}
	if err := x.req.Header.Read(x.br); err != nil {
		return err
	}
	switch {
	case streamed != nil:
		x.req.SetBodyStream(streamed, x.req.Header.ContentLength())
	case len(body) > 0:
		x.req.SetBodyRaw(body)
	}
	return nil
}

// trimCookies trims the whitespace around each cookie of a joined list.
func trimCookies(v string) string {
	parts := strings.Split(v, ";")
	for i, p := range parts {
		parts[i] = strings.Trim(p, " \t")
	}
	return strings.Join(parts, "; ")
}

// readStart reads a body whole when it is at most StreamBodyBytes, or its
// start and a stream over the rest, never past MaxBodyBytes in all.
func readStart(rb io.Reader, buf []byte, o *Options) ([]byte, io.Reader, error) {
	limit := o.StreamBodyBytes + 1
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(max(cap(buf), 4096), limit-len(buf)))
		}
		n, err := rb.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		if o.MaxBodyBytes > 0 && int64(len(buf)) > o.MaxBodyBytes {
			return buf, nil, codec.ErrBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil, nil
		}
		if err != nil {
			return buf, nil, err
		}
	}
	rest := &limitedBody{r: rb, left: o.MaxBodyBytes - int64(len(buf))}
	if o.MaxBodyBytes <= 0 {
		rest.left = -1
	}
	return buf, &boundedBody{Reader: io.MultiReader(bytes.NewReader(buf), rest)}, nil
}

// limitedBody is the rest of a streamed body, failing past the limit.
type limitedBody struct {
	r    io.Reader
	left int64 // -1: no limit
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.left >= 0 {
		if int64(n) > b.left {
			b.left = 0
			return 0, codec.ErrBodyTooLarge
		}
		b.left -= int64(n)
	}
	return n, err
}

// hopByHop are the fields HTTP/2 has no place for (RFC 9113 §8.2.2).
var hopByHop = [][]byte{
	[]byte("Connection"), []byte("Keep-Alive"), []byte("Proxy-Connection"),
	[]byte("Transfer-Encoding"), []byte("Upgrade"), []byte("TE"),
}

// writeAnswer sends resp as the stream's answer: the fields the transports
// would have written over HTTP/1.1, less the connection-specific ones.
func writeAnswer(w http.ResponseWriter, resp *fasthttp.Response, head bool) {
	status := resp.StatusCode()
	if status < 200 {
		// A protocol switch cannot happen on a stream (extended CONNECT
		// is not offered) and a backend's interim answer has no place.
		resp.Reset()
		status = http.StatusBadGateway
		resp.SetStatusCode(status)
		resp.Header.SetContentType("application/json")
		resp.SetBodyString(`{"error":"bad_gateway","message":"protocol switch not possible over HTTP/2"}`)
	}
	hdr := w.Header()
	// An answer with trailers (gRPC) is framed by them, the stream's last
	// HEADERS: a Content-Length beside them makes a client that trusts it
	// (curl) stop at the body's end and never read grpc-status.
	withTrailers := false
	for range resp.Header.Trailers() {
		withTrailers = true
		break
	}
	AnswerFields(resp.Header.Header(), func(name, value []byte) {
		if withTrailers && bytes.EqualFold(name, strContentLength) {
			return
		}
		k := http.CanonicalHeaderKey(string(name))
		hdr[k] = append(hdr[k], string(value))
	})
	w.WriteHeader(status)
	if withTrailers {
		// Sent now, x/net cannot add a Content-Length of its own (it does
		// for an answer written whole before its headers go).
		_ = http.NewResponseController(w).Flush()
	}
	if !head {
		_ = resp.BodyWriteTo(w)
	}
	// Trailers (a passed-through gRPC call's status): set after the body
	// under net/http's trailer prefix, x/net sends them as the stream's
	// last HEADERS frame.
	for name := range resp.Header.Trailers() {
		k := http.TrailerPrefix + http.CanonicalHeaderKey(string(name))
		for _, v := range resp.Header.PeekAll(string(name)) {
			hdr[k] = append(hdr[k], string(v))
		}
	}
}

var (
	strTrailer       = []byte("Trailer")
	strContentLength = []byte("Content-Length")
)

func isHopByHop(name []byte) bool {
	for _, h := range hopByHop {
		if bytes.EqualFold(name, h) {
			return true
		}
	}
	return false
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// isVisible reports s as non-empty visible ASCII: no space or control
// byte that would split or end a request line.
func isVisible(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}
