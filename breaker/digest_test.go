package breaker

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/digestcheck"
	"github.com/tollgate/tollgate/pipeline"
)

// A breaker is kept across a reload by the digest of its settings: a
// change to any of them must give a fresh one.
func TestSettingsDigestCoversEveryField(t *testing.T) {
	digestcheck.EveryField(t, Settings{FailureRate: 0.5}, func(v any) string {
		s := v.(Settings)
		return s.Digest()
	})
}

// TestServiceBreakerSurvivesUnchangedSettings: a service's breaker is the
// same object while its settings stay, a fresh one when they change, and
// settings that do not validate build none.
func TestServiceBreakerSurvivesUnchangedSettings(t *testing.T) {
	state := pipeline.NewState(time.Minute)
	get := func(s Settings) (*Breaker, error) {
		st := state.Begin()
		defer st.Commit()
		return ForService(st, "orders", &s, time.Now)
	}
	s := Settings{Window: 10 * time.Second, Buckets: 10, FailureRate: 0.5, MinRequests: 20, OpenFor: 5 * time.Second, HalfOpenProbes: 2}
	a, err := get(s)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := get(s); b != a {
		t.Fatal("unchanged settings got a fresh breaker")
	}
	s.FailureStatus = []int{502}
	if b, _ := get(s); b == a {
		t.Fatal("changed settings kept the old breaker")
	}
	s.FailureRate = 2
	if _, err := get(s); err == nil {
		t.Fatal("a failure rate of 2 was taken")
	}
}
