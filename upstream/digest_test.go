package upstream

import (
	"testing"

	"github.com/tollgate/tollgate/internal/digestcheck"
)

// An instance (its pools, its health) is kept across a reload by the
// digest of its settings: a change to any of them must give a fresh one.
func TestInstanceKeyCoversEverySetting(t *testing.T) {
	digestcheck.EveryField(t, instanceSettings{Addr: "127.0.0.1:80", Weight: 1}, func(v any) string {
		s := v.(instanceSettings)
		return instanceKey(s.Addr, s.Weight, s.Pool, s.Health)
	})
}
