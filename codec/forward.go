package codec

import (
	"bufio"
	"bytes"
	"errors"
	"net/netip"
	"strconv"

	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/valyala/fasthttp"
)

// hopByHop are the RFC 9110 §7.6.1 connection-specific fields, plus the
// legacy Proxy-Connection and HTTP2-Settings (the h2c upgrade's, which is
// never accepted and belongs to the client's connection even when
// Connection does not name it), that must never cross the gateway.
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"TE", "Trailer", "Upgrade", "HTTP2-Settings",
}

// framing fields are redone by the writer on each side; Expect was answered
// by the gateway itself (100 Continue) and is not the backend's to answer.
var framing = []string{"Content-Length", "Transfer-Encoding", "Host", "Expect"}

// GatewayOwned lists the fields whose value upstream is the gateway's word
// alone: every copy a client sent is removed (compared with case folded and
// '_' read as '-'), and the gateway writes its own where it has one. They
// carry the caller's address, scheme, host or path as a proxy saw them, the
// caller's authenticated identity, the trace (declared by the package that
// stamps it: StampedByGateway), or a method override, each of which a
// backend may trust, and the mark of mirrored copies.
var GatewayOwned = []string{
	"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Forwarded-Port", "X-Forwarded-Prefix",
	"X-Forwarded-Server", "X-Forwarded-Scheme", "X-Forwarded-Ssl", "X-Forwarded-Uri", "X-Forwarded-Path",
	"Forwarded", "X-Real-IP", "True-Client-IP", "X-Client-IP", "X-Cluster-Client-IP", "X-Originating-IP",
	"X-Remote-IP", "X-Remote-Addr", "CF-Connecting-IP", "Fastly-Client-IP", "X-Original-Forwarded-For",
	"X-Original-URL", "X-Original-URI", "X-Rewrite-URL", "X-Original-Host", "X-Host",
	"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override",
	"X-Consumer", "X-User-Id",
	"X-Tollgate-Mirror", // marks shadow traffic a mirror service may skip side effects for
}

// IsGatewayOwned reports whether name is one of GatewayOwned.
func IsGatewayOwned(name string) bool { return anyName([]byte(name), GatewayOwned) }

// ValidFieldName reports whether name is an RFC 9110 token.
func ValidFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !tokenChars[name[i]] {
			return false
		}
	}
	return true
}

// bodyFields describe the body the upstream receives; an allow-list never
// removes them.
var bodyFields = []string{"Content-Type", "Content-Encoding"}

// Trusted says whether an address is a proxy whose X-Forwarded-For the
// gateway believes.
type Trusted interface {
	Contains(ip netip.Addr) bool
}

// ErrBadForwardedFor is a trusted proxy's X-Forwarded-For with a hop that
// is not an address: the client cannot be known, so the request is refused
// rather than attributed to the proxy.
var ErrBadForwardedFor = errors.New("codec: invalid X-Forwarded-For from a trusted proxy")

var strXFF = []byte("X-Forwarded-For")

// ClientIP returns the caller's address: the peer's, unless the peer is a
// trusted proxy, in which case it walks X-Forwarded-For (every field line,
// joined in order as RFC 9110 §5.3 says) from the right and returns the
// first hop that is not itself trusted. Hops may carry a port
// ("1.2.3.4:5", "[::1]:5") or brackets; empty list elements are skipped. A
// hop that is not an address gives ErrBadForwardedFor.
func ClientIP(h *fasthttp.RequestHeader, peer netip.Addr, trusted Trusted) (netip.Addr, error) {
	if trusted == nil || !trusted.Contains(peer) {
		return peer, nil
	}
	client := peer
	lines := h.PeekAll(string(strXFF))
	for li := len(lines) - 1; li >= 0; li-- {
		xff := lines[li]
		for len(xff) > 0 {
			i := bytes.LastIndexByte(xff, ',')
			hop := ascii.TrimOWS(xff[i+1:])
			if i < 0 {
				xff = nil
			} else {
				xff = xff[:i]
			}
			if len(hop) == 0 {
				continue
			}
			ip, ok := parseHop(hop)
			if !ok {
				return peer, ErrBadForwardedFor
			}
			client = ip
			if !trusted.Contains(client) {
				return client, nil
			}
		}
	}
	return client, nil
}

// parseHop reads "ip", "ipv4:port", "[ipv6]" or "[ipv6]:port".
func parseHop(b []byte) (netip.Addr, bool) {
	if b[0] == '[' {
		end := bytes.IndexByte(b, ']')
		if end < 0 || (end+1 < len(b) && !validPort(b[end+1:])) {
			return netip.Addr{}, false
		}
		ip, err := netip.ParseAddr(bytesconv.B2S(b[1:end]))
		return ip.Unmap(), err == nil && ip.Zone() == ""
	}
	if i := bytes.IndexByte(b, ':'); i >= 0 && bytes.IndexByte(b[i+1:], ':') < 0 {
		// One colon: IPv4 with a port. IPv6 has at least two.
		if !validPort(b[i:]) {
			return netip.Addr{}, false
		}
		b = b[:i]
	}
	ip, err := netip.ParseAddr(bytesconv.B2S(b))
	return ip.Unmap(), err == nil && ip.Zone() == ""
}

// HeaderPolicy is a route's say over which client fields reach its
// backend. Names compare case-insensitively with '_' read as '-'. The
// gateway's own fields are written after the policy and so are never
// removed by it.
type HeaderPolicy struct {
	// Allow, when not empty, is the only client fields that pass (plus
	// Content-Type and Content-Encoding, which describe the body).
	Allow []string
	// Deny lists client fields that never pass.
	Deny []string
	// DropAuthorization and DropCookies keep client credentials from a
	// backend that must not see them.
	DropAuthorization bool
	DropCookies       bool
}

func (p *HeaderPolicy) passes(name []byte) bool {
	if p == nil {
		return true
	}
	if p.DropAuthorization && nameIs(name, "Authorization") {
		return false
	}
	if p.DropCookies && nameIs(name, "Cookie") {
		return false
	}
	if anyName(name, p.Deny) {
		return false
	}
	if len(p.Allow) > 0 {
		return anyName(name, p.Allow) || anyName(name, bodyFields)
	}
	return true
}

// fieldClass is what the forwarding step needs to know of a client field's
// name before it is forwarded.
type fieldClass uint8

const (
	classDrop       fieldClass = 1 << iota // framing or hop-by-hop: never forwarded
	classHop                               // hop-by-hop (of the drop class)
	classOwned                             // GatewayOwned: the gateway's word alone
	classConnection                        // Connection: its options name more hop-by-hop fields
)

// specialName is a name of one of the classes, with the folding it is
// compared with: hop-by-hop and framing names fold case only (Connection's
// options name them that way), the gateway's own also read '_' as '-'.
type specialName struct {
	name       string
	class      fieldClass
	underscore bool
}

// specialByLen holds the names of every class by length, so that a field
// is compared with the few of its own length instead of each list in turn.
var specialByLen = func() (t [32][]specialName) {
	add := func(names []string, class fieldClass, underscore bool) {
		for _, n := range names {
			if len(n) >= len(t) {
				panic("codec: field name longer than the class table: " + n)
			}
			c := class
			if n == "Connection" {
				c |= classConnection
			}
			t[len(n)] = append(t[len(n)], specialName{n, c, underscore})
		}
	}
	add(framing, classDrop, false)
	add(hopByHop, classDrop|classHop, false)
	add(GatewayOwned, classOwned, true)
	return t
}()

// classify returns the classes of a field name (0 for an ordinary field).
func classify(k []byte) fieldClass {
	if len(k) >= len(specialByLen) {
		return 0
	}
	for _, s := range specialByLen[len(k)] {
		if s.underscore && nameIs(k, s.name) || !s.underscore && ascii.EqualFold(k, s.name) {
			return s.class
		}
	}
	return 0
}

func anyName(b []byte, names []string) bool {
	for _, n := range names {
		if nameIs(b, n) {
			return true
		}
	}
	return false
}

// Outgoing is what the forwarding step knows about the upstream request
// besides the client's fields.
type Outgoing struct {
	// Host is the upstream's Host field: the Host the request was routed
	// on, or a rewrite's.
	Host []byte
	// ClientHost is the Host the client asked for (X-Forwarded-Host).
	ClientHost []byte
	// Peer is the TCP peer, Client the caller as the gateway believes it;
	// PeerTrusted says the peer is a trusted proxy whose X-Forwarded-*
	// fields are carried on.
	Peer, Client netip.Addr
	PeerTrusted  bool
	// TLS says the client's connection to the gateway is TLS: the scheme
	// upstream is https unless a trusted proxy said what the client used.
	TLS      bool
	Internal *Internal
	Policy   *HeaderPolicy
	// Received, when it indexes the request's section (Received.Check),
	// is where the fields are read from instead of the section.
	Received *Received
}

var (
	strCommaSpace = []byte(", ")
	strHTTP       = []byte("http")
	strHTTPS      = []byte("https")
)

// CollectFields fills l with the upstream header section of the request h:
// Host first, then every client field that may cross the gateway, in the
// order and with the bytes received, then the gateway's forwarding fields
// (X-Forwarded-For, X-Real-IP, X-Forwarded-Proto, X-Forwarded-Host).
// Removed: framing and hop-by-hop fields and those the client named in
// Connection, every copy of a GatewayOwned field, internal prefixes, and
// what the route's policy refuses. The caller may Add more fields (the
// identity and trace) before Apply.
//
// The fields are read once. A Connection field may name fields sent
// before it; only when one of its options names no field that goes anyway
// and the request has a field of that name is the section read again,
// with every option known from the start.
func CollectFields(l *FieldList, h *fasthttp.RequestHeader, o *Outgoing) {
	if collectFields(l, h, o, false) {
		return
	}
	collectFields(l, h, o, true)
}

// collectFields is CollectFields in one pass over h. With known, l.conn
// already holds the client's Connection options (an earlier pass); without,
// it gathers them as it goes and reports false, with l unfinished, when
// one of them names a field that is not dropped anyway and the request has
// a field of that name (which the pass may have let through before the
// option was read).
func collectFields(l *FieldList, h *fasthttp.RequestHeader, o *Outgoing, known bool) bool {
	if known {
		l.ResetKeepConn()
	} else {
		l.Reset()
	}
	l.AddString("Host", o.Host)
	f := fieldCollector{known: known}
	if r := o.Received; r != nil && r.indexes(h) {
		for i := range r.fields {
			k, v := r.field(i)
			f.field(l, o, k, v)
		}
	} else {
		for k, v := range Fields(h) {
			f.field(l, o, k, v)
		}
	}
	if f.lateOptions {
		// Were a field named by an option ahead of it, it went through.
		for k := range Fields(h) {
			if l.connNamed(k) {
				return false
			}
		}
	}
	proto, fwdHost := f.proto, f.fwdHost
	peer := -1 // where the peer's address starts in l.chain
	if o.Peer.IsValid() {
		// l.chain holds a trusted proxy's chain, and nothing otherwise.
		if len(l.chain) > 0 {
			l.chain = append(l.chain, strCommaSpace...)
		}
		peer = len(l.chain)
		l.chain = o.Peer.AppendTo(l.chain)
		l.AddString("X-Forwarded-For", l.chain)
	}
	switch {
	case peer >= 0 && o.Client == o.Peer:
		// The usual case, the client is the peer: its text is written.
		l.AddString("X-Real-IP", l.chain[peer:])
	case o.Client.IsValid():
		mark := len(l.chain)
		l.chain = o.Client.AppendTo(l.chain)
		l.AddString("X-Real-IP", l.chain[mark:])
	}
	switch {
	case bytes.EqualFold(proto, strHTTPS), proto == nil && o.TLS:
		l.AddString("X-Forwarded-Proto", strHTTPS)
	default:
		l.AddString("X-Forwarded-Proto", strHTTP)
	}
	if len(fwdHost) > 0 && ValidHost(fwdHost) {
		l.AddString("X-Forwarded-Host", fwdHost)
	} else {
		l.AddString("X-Forwarded-Host", o.ClientHost)
	}
	return true
}

// fieldCollector is one pass of collectFields over the client's fields.
// (The list and the request are not kept in it: a value taken from the
// request would make them escape with it.)
type fieldCollector struct {
	known bool
	// A trusted proxy's X-Forwarded-Proto and X-Forwarded-Host.
	proto, fwdHost []byte
	lateOptions    bool // an option that names no field dropped anyway
}

// field forwards one client field, or drops it.
func (f *fieldCollector) field(l *FieldList, o *Outgoing, k, v []byte) {
	class := classify(k)
	if class&classConnection != 0 && !f.known {
		f.lateOptions = l.addConnOptions(v) || f.lateOptions
	}
	switch {
	case class&classDrop != 0, len(l.conn) > 0 && l.connNamed(k):
		return
	case class&classOwned != 0:
		if o.PeerTrusted {
			switch {
			case nameIs(k, "X-Forwarded-For"):
				if len(l.chain) > 0 {
					l.chain = append(l.chain, strCommaSpace...)
				}
				l.chain = append(l.chain, v...)
			case nameIs(k, "X-Forwarded-Proto") && f.proto == nil:
				f.proto = v
			case nameIs(k, "X-Forwarded-Host") && f.fwdHost == nil:
				f.fwdHost = v
			}
		}
		return
	case o.Internal != nil && o.Internal.header(k):
		return
	case !o.Policy.passes(k):
		return
	}
	l.Add(k, v)
}

// addConnOptions records the options of a Connection field value; it
// reports whether one names a field that is not dropped anyway.
func (l *FieldList) addConnOptions(v []byte) (names bool) {
	forEachToken(v, func(tok []byte) {
		l.conn = append(l.conn, tok...)
		l.conn = append(l.conn, ',')
		names = names || classify(tok)&classDrop == 0
	})
	return names
}

// connNamed reports whether the client's Connection fields named k.
func (l *FieldList) connNamed(k []byte) bool {
	c := l.conn
	for len(c) > 0 {
		i := bytes.IndexByte(c, ',')
		// Plain case folding: a hop-by-hop declaration names one field,
		// and "X_A" is not "X-A" to HTTP.
		if len(k) == i && ascii.EqualFold(k, bytesconv.B2S(c[:i])) {
			return true
		}
		c = c[i+1:]
	}
	return false
}

// SetTarget records the upstream request target: path, then '?' and the
// query when there is one. (An empty query leaves no '?': a client's "/a?"
// and "/a" are one request to the backend, as HTTP clients normalize
// them.) It copies both.
func (l *FieldList) SetTarget(path, query []byte, hasQuery bool) {
	l.uri = append(l.uri[:0], path...)
	if hasQuery && len(query) > 0 {
		l.uri = append(l.uri, '?')
		l.uri = append(l.uri, query...)
	}
}

// Apply writes l and its target (SetTarget) into req's header for the
// trip upstream: method kept, protocol HTTP/1.1, fields exactly as in l.
// Framing is left to the writer (Content-Length from the buffered body,
// or the stream's declared length, or chunked). The header is put in
// fasthttp's raw mode, so no field is reordered, re-cased, merged (Cookie)
// or invented (a default Content-Type); the upstream client must not
// normalize paths (it would decode them again).
func Apply(req *fasthttp.Request, l *FieldList) {
	h := &req.Header
	l.method = append(l.method[:0], h.Method()...)
	streamed := req.IsBodyStream()
	cl := h.ContentLength()
	h.Reset()
	h.DisableNormalizing()
	h.DisableSpecialHeader()
	h.SetNoDefaultContentType(true)
	h.SetMethodBytes(l.method)
	h.SetProtocolBytes(strHTTP11)
	req.SetRequestURIBytes(l.uri)
	req.UseHostHeader = true
	for i := range l.spans {
		k, v := l.Field(i)
		h.AddBytesKV(k, v)
	}
	if streamed {
		h.SetContentLength(cl)
	}
}

var (
	strSpaceHTTP11CRLF = []byte(" HTTP/1.1\r\n")
	strCRLF            = []byte("\r\n")
	strCLColonSpace    = []byte("Content-Length: ")
)

// WriteRequest writes the upstream request l describes (its target and
// fields, built by the forwarding step) with req's method and body: the
// one way every exchange sends a request upstream. A buffered body goes
// straight from l — the request line, l's fields, the body with its
// length — byte for byte what Apply and then req.Write would send,
// without rebuilding req's header (each field copied and scanned twice,
// then serialized again); req keeps the client's header. A body that
// streams is framed by fasthttp, which writes from req's own header: l is
// applied to req first (Apply), and the stream is consumed.
func WriteRequest(w *bufio.Writer, req *fasthttp.Request, l *FieldList) error {
	if req.IsBodyStream() {
		Apply(req, l)
		return req.Write(w)
	}
	h := &req.Header
	_, _ = w.Write(h.Method())
	_ = w.WriteByte(' ')
	_, _ = w.Write(l.uri)
	_, _ = w.Write(strSpaceHTTP11CRLF)
	_, _ = w.Write(l.buf)
	body := req.Body()
	// As fasthttp frames a raw-mode request: a length whenever there is a
	// body or the method may carry one.
	if len(body) > 0 || !(h.IsGet() || h.IsHead()) {
		_, _ = w.Write(strCLColonSpace)
		var n [20]byte
		_, _ = w.Write(strconv.AppendInt(n[:0], int64(len(body)), 10))
		_, _ = w.Write(strCRLF)
	}
	_, _ = w.Write(strCRLF)
	_, err := w.Write(body)
	return err
}

// forEachToken calls f for each comma-separated token of a list value. The
// token aliases v.
func forEachToken(v []byte, f func([]byte)) {
	for len(v) > 0 {
		i := bytes.IndexByte(v, ',')
		var tok []byte
		if i < 0 {
			tok, v = v, nil
		} else {
			tok, v = v[:i], v[i+1:]
		}
		tok = ascii.TrimOWS(tok)
		if len(tok) > 0 {
			f(tok)
		}
	}
}

var strConnection = []byte("Connection")

// StripResponseHopByHop removes hop-by-hop fields, and those the upstream
// named in Connection, from an upstream's answer, and every copy of the
// fields the gateway stamps on answers itself (StampedByGateway: the
// trace): the client gets the gateway's word on them alone.
//
// Most answers carry none of them: one pass over the fields finds out, and
// only a field that is there is deleted (each deletion scans the fields
// again).
func StripResponseHopByHop(h *fasthttp.ResponseHeader) {
	if conn := h.PeekBytes(strConnection); len(conn) > 0 {
		forEachToken(conn, func(name []byte) {
			if !bytes.EqualFold(name, strConnection) {
				h.DelBytes(name)
			}
		})
		h.DelBytes(strConnection)
	}
	hop := false
	for range h.Trailers() {
		hop = true
		break
	}
	own := false
	for k := range h.All() {
		hop = hop || classify(k)&classHop != 0
		own = own || isStamped(k)
	}
	if hop {
		for _, k := range hopByHop {
			h.Del(k)
		}
	}
	if own {
		for _, k := range stamped {
			h.Del(k)
		}
	}
}
