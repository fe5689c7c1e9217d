package clienttls

import (
	"testing"

	"github.com/tollgate/tollgate/internal/digestcheck"
	"github.com/tollgate/tollgate/pipeline"
)

// A gRPC service's TLS client is kept across reloads by a digest of its
// settings: a change to any of their fields must give a fresh one, never
// the one built before.
func TestGRPCTLSKeyCoversEverySetting(t *testing.T) {
	digestcheck.EveryField(t, &Settings{CAFile: "ca.pem", Line: 3}, pipeline.Digest)
}
