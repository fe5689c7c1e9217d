package admin

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The admin listener answers only requests whose Host names it. A browser
// on the operator's machine can be made to send requests to the listener
// under a name an attacker controls (DNS rebinding: the attacker's name
// first resolves to the attacker, then to 127.0.0.1), and the page then
// reads the answers as its own origin's; the Host is the one thing such a
// request cannot choose, as the browser sets it to the attacker's name.
//
// A Host names the listener when, its port aside (the attacker can pick
// the port too, so it proves nothing), it is:
//   - localhost, or a loopback address;
//   - the address the request arrived on (what a client that dialed the
//     address, such as a probe of a pod's IP, sends);
//   - the host of the configured listen address;
//   - one of admin.hosts.
//
// A request without Host (HTTP/1.0) is let through: every browser sends
// one. Anything else is answered 421 Misdirected Request (RFC 9110
// §15.5.20): this server is not the one for that name.

// hostNames is the set of names configured for the listener, lower case.
type hostNames map[string]bool

func newHostNames(listen string, extra []string) hostNames {
	names := hostNames{"localhost": true}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" {
		if a, err := netip.ParseAddr(h); err != nil || !a.IsUnspecified() {
			names[normalHost(h)] = true
		}
	}
	for _, h := range extra {
		names[normalHost(h)] = true
	}
	return names
}

// normalHost is a host name or address as compared: lower case, without a
// final dot or IPv6 brackets.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// hostOf is the host part of a Host value, port and brackets removed.
func hostOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return normalHost(h)
	}
	return normalHost(hostport)
}

// names reports whether the request's Host names the listener.
func (n hostNames) names(r *http.Request) bool {
	if r.Host == "" {
		return true
	}
	h := hostOf(r.Host)
	if n[h] {
		return true
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		return false
	}
	a = a.Unmap()
	if a.IsLoopback() {
		return true
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(local.String()); err == nil && ap.Addr().Unmap() == a {
			return true
		}
	}
	return false
}

// guardHost refuses (421) requests whose Host does not name the listener.
func (s *Server) guardHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts.names(r) {
			fail(w, http.StatusMisdirectedRequest,
				"this listener does not answer to that Host: use its address, localhost, or a name in admin.hosts")
			return
		}
		next.ServeHTTP(w, r)
	})
}
