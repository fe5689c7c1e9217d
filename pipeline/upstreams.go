package pipeline

import (
	"fmt"

	"github.com/tollgate/tollgate/codec"
)

// EdgeKey holds what the client side of the gateway says about the edge,
// which config reads from client: (trusted proxies, internal prefixes),
// for the step that builds the request a backend gets.
var EdgeKey = NewKey[*Edge]("pipeline.edge")

// Edge is what crossing the gateway's edge takes: whose X-Forwarded-For
// is believed, and the internal header fields and query parameters a
// client may not send on.
type Edge struct {
	Trusted  codec.Trusted
	Internal codec.Internal
}

// UpstreamsKey holds the services a configuration defines, which the
// package owning the services section shares, for the routes that send
// requests to them.
var UpstreamsKey = NewKey[Upstreams]("pipeline.upstreams")

// Upstreams is what a route needs of the services: the action that
// sends a request to one, and the step that builds that request.
type Upstreams interface {
	// Has reports whether the service is defined.
	Has(service string) bool
	// Action sends a request to the service, to its instances whose
	// registry metadata has every key of metadata with its value when
	// metadata is not empty; nil when the service is not defined.
	Action(service string, metadata map[string]string) Action
	// Protocol is what the service's instances speak: "http", "grpc" or
	// "dubbo" ("" for a service not defined).
	Protocol(service string) string
	// Forwarding is the last step of a route that forwards: it builds
	// the request the backend gets, keeping the client's header fields
	// policy lets through (nil: all but what must not cross the edge).
	Forwarding(policy *codec.HeaderPolicy) Filter
}

// PlacedError is a section's error about a place in the file other than
// the section's own start (an entry, a field): config reports it there.
type PlacedError struct {
	Line, Col int
	Msg       string
}

func (e *PlacedError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// ErrorAt returns a PlacedError at line (0: the file as a whole).
func ErrorAt(line int, format string, a ...any) error {
	return &PlacedError{Line: line, Msg: fmt.Sprintf(format, a...)}
}
