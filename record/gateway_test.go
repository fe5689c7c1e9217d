package record

import (
	"testing"

	"github.com/tollgate/tollgate/internal/gatewaytest"
)

// startGateway serves yaml, its ${NAME} references taken from vars, on a
// real gateway (with only the features this package registers).
func startGateway(tb testing.TB, yaml string, vars map[string]string) *gatewaytest.Gateway {
	tb.Helper()
	return gatewaytest.Start(tb, yaml, gatewaytest.Options{Vars: vars})
}
