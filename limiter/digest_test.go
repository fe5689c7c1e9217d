package limiter

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/digestcheck"
)

// A rule's counters are kept across a reload by the digest of its
// settings: a change to any field of Config the digest does not leave
// out on purpose (digest:"-") must give fresh counters, or be refused.
func TestRuleDigestCoversEverySetting(t *testing.T) {
	// Bases where most single changes are still valid rules: a leaky
	// bucket (max_delay applies) by header, a rule by ip (ipv6_prefix).
	for _, base := range []Config{
		{By: "header.X-Id", Rate: 10, Per: Duration(time.Second), Algorithm: "leaky_bucket"},
		{By: "ip", Rate: 10, IPv6Prefix: 64, RejectFor: Duration(time.Second)},
	} {
		digestcheck.EveryField(t, base, func(v any) string {
			c := v.(Config)
			s, err := c.validate()
			if err != nil {
				return "refused" // never reaches the state
			}
			return s.digest()
		})
	}
}

// Two ways of writing one rule (a default left out or written in) share
// counters, as they did when the digest listed the validated values.
func TestRuleDigestReadsDefaults(t *testing.T) {
	a, err := (&Config{By: "ip", Rate: 10}).validate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := (&Config{By: "ip", Rate: 10, Per: Duration(time.Second), Algorithm: "token_bucket", Scope: "local",
		Burst: 15, MaxKeys: DefaultMaxKeys, Status: 429, Headers: true}).validate()
	if err != nil {
		t.Fatal(err)
	}
	if a.digest() != b.digest() {
		t.Fatal("a rule written with its defaults does not share the counters of the same rule without")
	}
}
