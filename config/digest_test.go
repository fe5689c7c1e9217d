package config

import (
	"testing"

	"github.com/tollgate/tollgate/internal/digestcheck"
	"github.com/tollgate/tollgate/pipeline"
)

// The settings config keys reload-surviving state by: a change to any of
// their fields must give a fresh object, never the one built before.
func TestGRPCTLSKeyCoversEverySetting(t *testing.T) {
	digestcheck.EveryField(t, &ClientTLS{CAFile: "ca.pem", Line: 3}, pipeline.Digest)
}
