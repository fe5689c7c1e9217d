package config

import "gopkg.in/yaml.v3"

// The client-side transports a configuration may name (transport:).
const (
	// TransportReactor is the epoll event loops of server/reactor, the
	// default.
	TransportReactor = "reactor"
	// TransportFastHTTP is fasthttp.Server, a goroutine per connection.
	TransportFastHTTP = "fasthttp"
)

// IsReactor reports whether a transport name means the reactor: its own
// name, or "netpoll", the name it carried while it was built on the
// library of that name, which configurations and TOLLGATE_TRANSPORT
// settings written then still use.
func IsReactor(transport string) bool {
	return transport == TransportReactor || transport == "netpoll"
}

// transportSetting is the transport as the document wrote it, and where,
// so that a refusal names the line (or the environment, when
// TOLLGATE_TRANSPORT replaced it).
type transportSetting struct {
	value string
	line  int
}

// noteTransport records the document's transport setting.
func (f *File) noteTransport(doc *yaml.Node) {
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if k, v := doc.Content[i], doc.Content[i+1]; k.Value == "transport" {
			f.transportAt = transportSetting{value: v.Value, line: k.Line}
		}
	}
}

// validateTransport refuses a transport name the gateway does not have.
func (f *File) validateTransport(bad func(line int, format string, a ...any) error) error {
	if IsReactor(f.Transport) || f.Transport == TransportFastHTTP {
		return nil
	}
	line, where := 0, "TOLLGATE_TRANSPORT"
	if f.transportAt.value == f.Transport {
		line, where = f.transportAt.line, "transport"
	}
	if f.Transport == "netpoll-dispatch" {
		// Retired: the same reactor handing each ready connection to a
		// goroutine, which cost more CPU per request than the event loops
		// for no gain (bench/RESULTS.md, "netpoll-dispatch retired").
		return bad(line, "%s %q was retired: use %q (the event loops, the default), or %q", where, f.Transport, TransportReactor, TransportFastHTTP)
	}
	return bad(line, "%s %q: want %s or %s (%q is a synonym of %s)", where, f.Transport, TransportReactor, TransportFastHTTP, "netpoll", TransportReactor)
}
