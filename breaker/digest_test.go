package breaker

import (
	"testing"

	"github.com/tollgate/tollgate/internal/digestcheck"
)

// A breaker is kept across a reload by the digest of its settings: a
// change to any of them must give a fresh one.
func TestSettingsDigestCoversEveryField(t *testing.T) {
	digestcheck.EveryField(t, Settings{FailureRate: 0.5}, func(v any) string {
		s := v.(Settings)
		return s.Digest()
	})
}
