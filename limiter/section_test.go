package limiter

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/pipeline"
)

func provision(t *testing.T, key string, env *pipeline.Env, cfg any) error {
	t.Helper()
	s, ok := pipeline.LookupSection(key)
	if !ok {
		t.Fatalf("no section %q", key)
	}
	return s.Provision(env, cfg)
}

// TestTiersResolveTheConsumersQuotas: the tiers section gives each
// consumer the requests per second of its tier, keeps a custom quota,
// and adds the default tiers the file leaves out.
func TestTiersResolveTheConsumersQuotas(t *testing.T) {
	env := &pipeline.Env{}
	pipeline.ConsumerQuotasKey.Set(env, map[string]pipeline.Quota{
		"a": {Tier: "gold"}, "b": {Tier: "free"}, "c": {Tier: "custom", QPS: 7},
	})
	tiers := Tiers{"gold": 500, "free": 3}
	if err := provision(t, "tiers", env, &tiers); err != nil {
		t.Fatal(err)
	}
	q, ok := quotasKey.Get(env)
	if !ok {
		t.Fatal("no quotas shared")
	}
	want := map[string]pipeline.Quota{"a": {Tier: "gold", QPS: 500}, "b": {Tier: "free", QPS: 3}, "c": {Tier: "custom", QPS: 7}}
	if !reflect.DeepEqual(q.Consumers, want) {
		t.Fatalf("quotas %v, want %v", q.Consumers, want)
	}
	if tiers["basic"] != 100 || tiers["enterprise"] != 1000 || tiers["free"] != 3 {
		t.Fatalf("tiers with defaults %v", tiers)
	}

	for _, c := range []struct {
		declared map[string]pipeline.Quota
		tiers    Tiers
		want     string
	}{
		{map[string]pipeline.Quota{"a": {Tier: "platinum"}}, nil, `consumer "a": tier "platinum" is not defined in tiers`},
		{nil, Tiers{"free": -1}, "tiers.free: -1 requests per second must not be negative"},
	} {
		env := &pipeline.Env{}
		pipeline.ConsumerQuotasKey.Set(env, c.declared)
		if err := provision(t, "tiers", env, &c.tiers); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}

func TestStatusDefaultsAndRange(t *testing.T) {
	env := &pipeline.Env{}
	var s Statuses
	if err := provision(t, "status", env, &s); err != nil {
		t.Fatal(err)
	}
	if got, _ := statusKey.Get(env); got != (Statuses{LocalLimit: 911, ClusterLimit: 919}) || s != got {
		t.Fatalf("status %+v, config %+v", got, s)
	}
	if err := provision(t, "status", env, &Statuses{ClusterLimit: 1000}); err == nil || !strings.Contains(err.Error(), "status.cluster_limit 1000") {
		t.Fatalf("error %v", err)
	}
}
