package record

import (
	"testing"

	"github.com/tollgate/tollgate/internal/digestcheck"
)

// A writer is kept across a reload by the digest of its settings: a
// change to any of them must give a fresh one.
func TestSettingsDigestCoversEveryField(t *testing.T) {
	digestcheck.EveryField(t, Settings{Dir: "rec"}, func(v any) string {
		return v.(Settings).withDefaults().digest()
	})
}
