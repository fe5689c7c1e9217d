package upstream

import (
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
)

// boundBody gives a streamed request body the exchange's deadline: it is
// read while it is written upstream, so a client that sends it slowly
// would otherwise hold the backend connection for as long as the client's
// body_timeout. Past the deadline its reads fail with codec.ErrBodyTimeout,
// answered 408 and not counted against the backend. Bodies of transports
// that cannot be bounded keep to the upstream write deadline.
func boundBody(c *pipeline.Ctx, deadline time.Time) {
	if !c.Req.IsBodyStream() {
		return
	}
	if b, ok := c.Req.BodyStream().(codec.BoundedBody); ok {
		b.ReadBefore(deadline)
	}
}
