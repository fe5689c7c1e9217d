package source

import (
	"bytes"
	"net/netip"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// Found says what a lookup found.
type Found uint8

const (
	Absent    Found = iota
	Scalar          // a value that compares with literals
	Container       // a JSON object or array: present, equal to nothing
)

// MaxJSONScan is how much of a JSON body json sources look at: the first
// 64 KiB. It bounds the work one lookup can do whatever the body size.
const MaxJSONScan = 64 << 10

// maxJSONNesting bounds how deeply a JSON document may nest (within
// MaxJSONScan) before the scanner gives up on it as too deep.
const maxJSONNesting = 1024

type bodyKind uint8

const (
	bodyUnknown bodyKind = iota // not looked at yet
	bodyNone                    // no readable form or JSON body
	bodyForm
	bodyJSON
)

// Reader looks sources up in one request. It remembers what it learnt of
// the body between lookups; make one per request (it lives on the stack)
// with NewReader.
type Reader struct {
	c    *pipeline.Ctx
	body bodyKind
	data []byte // the body (form), or its first MaxJSONScan bytes (json)
	cut  bool   // data is a prefix of a longer JSON body
}

// NewReader returns a Reader of c's request.
func NewReader(c *pipeline.Ctx) Reader { return Reader{c: c} }

// Value looks s up. The returned bytes borrow from the request or from
// c.Scratch and are valid until the next lookup or the request's end. It
// allocates nothing in steady state.
func (r *Reader) Value(s *Source) ([]byte, Found) {
	c := r.c
	var v []byte
	switch s.Kind {
	case Query:
		args := c.QueryArgs()
		v = args.Peek(s.Name)
		if v == nil && !args.Has(s.Name) {
			return nil, Absent
		}
		return v, Scalar
	case Header:
		var ok bool
		if v, ok = header(&c.Req.Header, s.Name); ok {
			return v, Scalar
		}
		return nil, Absent
	case Cookie:
		// Read from the fields as received, so the upstream still gets
		// the client's Cookie bytes (codec.Cookie says why).
		if v = codec.Cookie(&c.Req.Header, bytesconv.S2B(s.Name)); v != nil {
			return v, Scalar
		}
		return nil, Absent
	case Form:
		if r.bodyOf() != bodyForm {
			return nil, Absent
		}
		return r.form(s.Name)
	case JSON:
		if r.bodyOf() != bodyJSON {
			return nil, Absent
		}
		return r.json(s.Path)
	case IP:
		if !c.ClientIP.IsValid() {
			return nil, Absent
		}
		c.Scratch = c.ClientIP.AppendTo(c.Scratch[:0])
		return c.Scratch, Scalar
	case Path:
		return c.Target.Path, Scalar
	case Method:
		return c.Req.Header.Method(), Scalar
	case Consumer:
		if c.Consumer == "" {
			return nil, Absent
		}
		return bytesconv.S2B(c.Consumer), Scalar
	case User:
		if c.UserID == "" {
			return nil, Absent
		}
		return bytesconv.S2B(c.UserID), Scalar
	}
	return nil, Absent
}

// ClientIP returns the caller's address as the gateway believes it.
func (r *Reader) ClientIP() netip.Addr { return r.c.ClientIP }

// header returns the first value of the field named name, compared
// case-insensitively, whether or not the transport normalizes names. It
// scans the fields as received (codec.Fields), which neither makes
// fasthttp re-serialize Cookie nor rewrites the received names in place.
func header(h *fasthttp.RequestHeader, name string) ([]byte, bool) {
	for k, v := range codec.Fields(h) {
		if len(k) == len(name) && ascii.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}

// MaxScratch is the largest buffer a lookup grows c.Scratch to. A longer
// decoded value (only a form value can be longer) gets a buffer of its own,
// so that one huge request does not leave a huge buffer in the Ctx pool.
const MaxScratch = 64 << 10

// buffer returns an empty buffer for decoding a value of up to n bytes.
func (r *Reader) buffer(n int) []byte {
	if n > cap(r.c.Scratch) {
		return make([]byte, 0, n)
	}
	return r.c.Scratch[:0]
}

// keep stores a decoding buffer back into c.Scratch so that its capacity is
// reused, unless it is one of buffer's oversized ones.
func (r *Reader) keep(buf []byte) {
	if cap(buf) <= MaxScratch {
		r.c.Scratch = buf[:0]
	}
}

// bodyOf decides, once per evaluation, whether the body can be read as a
// form or as JSON: it must be buffered (a stream still belongs to the
// upstream and is never read here), not content-encoded, and of the right
// media type.
func (r *Reader) bodyOf() bodyKind {
	if r.body != bodyUnknown {
		return r.body
	}
	r.body = bodyNone
	req := r.c.Req
	if req.IsBodyStream() {
		return bodyNone
	}
	kind := mediaKind(req.Header.ContentType())
	if kind == bodyNone {
		return bodyNone
	}
	if codec.ContentEncoded(&req.Header) {
		return bodyNone
	}
	data := req.Body()
	if kind == bodyJSON && len(data) > MaxJSONScan {
		data, r.cut = data[:MaxJSONScan], true
	}
	r.body, r.data = kind, data
	return kind
}

// BodyHidden reports a body that declares a form or JSON media type but
// that no lookup can read: streamed (larger than stream_body_bytes, so
// never in memory) or content-encoded. A check that must see every value
// (the WAF) cannot vouch for such a request.
func (r *Reader) BodyHidden() bool {
	req := r.c.Req
	if mediaKind(req.Header.ContentType()) == bodyNone {
		return false
	}
	return req.IsBodyStream() || codec.ContentEncoded(&req.Header)
}

// AppendDecoded appends the urlencoded enc decoded ('+' a space, %XX its
// byte) to dst: how a backend that decodes a value once more would read
// it.
func AppendDecoded(dst, enc []byte) []byte { return appendUnescaped(dst, enc) }

// mediaKind classifies a Content-Type value: application/x-www-form-urlencoded,
// application/json or anything ending in +json; parameters ignored.
func mediaKind(ct []byte) bodyKind {
	switch MediaOf(ct) {
	case MediaForm:
		return bodyForm
	case MediaJSON:
		return bodyJSON
	}
	return bodyNone
}

// Media is what a Content-Type says a body is, for reading its values.
type Media uint8

const (
	MediaOther     Media = iota
	MediaForm            // application/x-www-form-urlencoded
	MediaJSON            // application/json or any +json type
	MediaMultipart       // multipart/form-data
)

// MediaOf classifies a Content-Type (parameters ignored).
func MediaOf(ct []byte) Media {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = ascii.TrimOWS(ct)
	switch {
	case ascii.EqualFold(ct, "application/x-www-form-urlencoded"):
		return MediaForm
	case ascii.EqualFold(ct, "application/json"):
		return MediaJSON
	case len(ct) > len("+json") && ascii.EqualFold(ct[len(ct)-len("+json"):], "+json"):
		return MediaJSON
	case ascii.EqualFold(ct, "multipart/form-data"):
		return MediaMultipart
	}
	return MediaOther
}

// form finds the first parameter named name in the urlencoded body and
// returns its decoded value (decoded into c.Scratch when it needs decoding).
func (r *Reader) form(name string) ([]byte, Found) {
	b := r.data
	for len(b) > 0 {
		var key, val []byte
		if key, val, b = nextPair(b); len(key) == 0 && len(val) == 0 {
			continue
		}
		if !formKeyIs(key, name) {
			continue
		}
		if bytes.IndexByte(val, '%') < 0 && bytes.IndexByte(val, '+') < 0 {
			return val, Scalar
		}
		buf := appendUnescaped(r.buffer(len(val)), val)
		r.keep(buf)
		return buf, Scalar
	}
	return nil, Absent
}

// nextPair splits the first key=value pair (still encoded) off an
// urlencoded string, at '&' only, and returns the rest.
func nextPair(b []byte) (key, val, rest []byte) {
	pair := b
	if i := bytes.IndexByte(b, '&'); i >= 0 {
		pair, rest = b[:i], b[i+1:]
	}
	key, val = pair, pair[len(pair):]
	if i := bytes.IndexByte(pair, '='); i >= 0 {
		key, val = pair[:i], pair[i+1:]
	}
	return key, val, rest
}

// formKeyIs reports whether the urlencoded key enc decodes to name, without
// decoding it anywhere.
func formKeyIs(enc []byte, name string) bool {
	d := urlDecoder{b: enc}
	j := 0
	for ; ; j++ {
		c, ok := d.next()
		if !ok {
			break
		}
		if j >= len(name) || name[j] != c {
			return false
		}
	}
	return j == len(name)
}

func appendUnescaped(dst, enc []byte) []byte {
	d := urlDecoder{b: enc}
	for {
		c, ok := d.next()
		if !ok {
			return dst
		}
		dst = append(dst, c)
	}
}

// urlDecoder yields the bytes an urlencoded string decodes to, the way
// fasthttp decodes query strings: "+" is a space, "%XX" the byte XX, a "%"
// without two hex digits after it stands for itself, and a "%" too close to
// the end leaves the rest as it is.
type urlDecoder struct {
	b   []byte
	i   int
	raw bool // the rest is taken verbatim
}

func (d *urlDecoder) next() (byte, bool) {
	if d.i >= len(d.b) {
		return 0, false
	}
	c := d.b[d.i]
	d.i++
	if d.raw {
		return c, true
	}
	switch c {
	case '+':
		return ' ', true
	case '%':
		if d.i+2 > len(d.b) {
			d.raw = true
			return c, true
		}
		hi, lo := ascii.Unhex(d.b[d.i]), ascii.Unhex(d.b[d.i+1])
		if hi < 0 || lo < 0 {
			return c, true
		}
		d.i += 2
		return byte(hi<<4 | lo), true
	}
	return c, true
}
