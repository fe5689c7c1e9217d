//go:build !linux

package reactor

import (
	"errors"

	"github.com/tollgate/tollgate/server/transport"
)

// New refuses: the reactor's loops are epoll's, which only Linux has.
func New(transport.Handler, transport.Options) (transport.Transport, error) {
	return nil, errors.New("the reactor transport needs Linux; set transport: fasthttp")
}
