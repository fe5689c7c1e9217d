package codec

import (
	"bytes"
	"net/netip"

	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/valyala/fasthttp"
)

// hopByHop are the RFC 9110 §7.6.1 connection-specific fields, plus the
// legacy Proxy-Connection, that must never cross the gateway. Framing
// (Content-Length / Transfer-Encoding) is redone by fasthttp on each side.
var hopByHop = [][]byte{
	[]byte("Connection"),
	[]byte("Keep-Alive"),
	[]byte("Proxy-Connection"),
	[]byte("Proxy-Authenticate"),
	[]byte("Proxy-Authorization"),
	[]byte("TE"),
	[]byte("Trailer"),
	[]byte("Upgrade"),
}

var strConnection = []byte("Connection")

// StripRequestHopByHop removes hop-by-hop fields and every field the client
// named in Connection from a request about to go upstream.
func StripRequestHopByHop(h *fasthttp.RequestHeader) {
	if conn := h.PeekBytes(strConnection); len(conn) > 0 {
		forEachToken(conn, func(name []byte) { h.DelBytes(name) })
	}
	for _, k := range hopByHop {
		h.DelBytes(k)
	}
}

// StripResponseHopByHop does the same for an upstream's answer.
func StripResponseHopByHop(h *fasthttp.ResponseHeader) {
	if conn := h.PeekBytes(strConnection); len(conn) > 0 {
		forEachToken(conn, func(name []byte) { h.DelBytes(name) })
	}
	for _, k := range hopByHop {
		h.DelBytes(k)
	}
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
		tok = trimOWS(tok)
		if len(tok) > 0 && !bytes.EqualFold(tok, strConnection) {
			f(tok)
		}
	}
}

var (
	strXFF        = []byte("X-Forwarded-For")
	strXRealIP    = []byte("X-Real-IP")
	strXFProto    = []byte("X-Forwarded-Proto")
	strXFHost     = []byte("X-Forwarded-Host")
	strHTTP       = []byte("http")
	strCommaSpace = []byte(", ")
)

// Trusted says whether an address is a proxy whose X-Forwarded-For the
// gateway believes.
type Trusted interface {
	Contains(ip netip.Addr) bool
}

// ClientIP returns the caller's address: the peer's, unless the peer is a
// trusted proxy, in which case it walks X-Forwarded-For from the right and
// returns the first hop that is not itself trusted.
func ClientIP(h *fasthttp.RequestHeader, peer netip.Addr, trusted Trusted) netip.Addr {
	if trusted == nil || !trusted.Contains(peer) {
		return peer
	}
	xff := h.PeekBytes(strXFF)
	client := peer
	for len(xff) > 0 {
		i := bytes.LastIndexByte(xff, ',')
		hop := trimOWS(xff[i+1:])
		if i < 0 {
			xff = nil
		} else {
			xff = xff[:i]
		}
		ip, err := netip.ParseAddr(bytesconv.B2S(hop))
		if err != nil {
			return client
		}
		client = ip.Unmap()
		if !trusted.Contains(client) {
			return client
		}
	}
	return client
}

// SetForwarded writes the forwarding fields for the upstream request:
// X-Forwarded-For gets the peer appended when the peer is trusted (its chain
// is believed) and is replaced by the peer otherwise; X-Real-IP is the
// client; X-Forwarded-Proto and X-Forwarded-Host describe the client's view.
// scratch is a reusable buffer; the extended buffer is returned.
func SetForwarded(h *fasthttp.RequestHeader, peer, client netip.Addr, peerTrusted bool, scratch []byte) []byte {
	b := scratch[:0]
	if peerTrusted {
		if prev := h.PeekBytes(strXFF); len(prev) > 0 {
			b = append(b, prev...)
			b = append(b, strCommaSpace...)
		}
	}
	b = peer.AppendTo(b)
	h.SetBytesKV(strXFF, b)
	mark := len(b)
	b = client.AppendTo(b)
	h.SetBytesKV(strXRealIP, b[mark:])
	if !peerTrusted || len(h.PeekBytes(strXFProto)) == 0 {
		h.SetBytesKV(strXFProto, strHTTP)
	}
	if !peerTrusted || len(h.PeekBytes(strXFHost)) == 0 {
		h.SetBytesKV(strXFHost, h.Host())
	}
	return b
}
