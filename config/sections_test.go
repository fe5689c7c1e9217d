package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

const limitedRoute = `
services:
  up: {instances: [{addr: "127.0.0.1:1"}]}
routes:
  - name: api
    match: {prefix: /}
    service: up
    limits: [{by: ip, rate: 10}, {by: ip, rate: 20, scope: cluster}]
`

// refusalStatuses are the statuses the route's limit rules refuse with,
// as they show them to operators.
func refusalStatuses(t *testing.T, s *Snapshot) []int {
	t.Helper()
	var out []int
	s.Inspectors(func(_ string, in pipeline.Inspector) {
		in.Inspect(func(kind string, state any) {
			if kind == "limits" {
				out = append(out, int(reflect.ValueOf(state).FieldByName("Status").Int()))
			}
		})
	})
	return out
}

// TestStatusSectionIsTheLimiters: the top-level status section is
// decoded into the limiter's own type and provisioned by it; config only
// finds it, and its errors keep their place.
func TestStatusSectionIsTheLimiters(t *testing.T) {
	s, err := compile(t, limitedRoute, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := refusalStatuses(t, s); !reflect.DeepEqual(got, []int{911, 919}) {
		t.Fatalf("refusals by default %v, want [911 919]", got)
	}
	s, err = compile(t, "status: {local_limit: 429, cluster_limit: 503}\n"+limitedRoute, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := refusalStatuses(t, s); !reflect.DeepEqual(got, []int{429, 503}) {
		t.Fatalf("refusals %v, want [429 503]", got)
	}
	// The effective configuration shows the section with its defaults.
	b, err := yaml.Marshal(s.File)
	if err != nil {
		t.Fatal(err)
	}
	var effective struct {
		Status map[string]int `yaml:"status"`
	}
	if err := yaml.Unmarshal(b, &effective); err != nil || effective.Status["local_limit"] != 429 || effective.Status["cluster_limit"] != 503 {
		t.Fatalf("effective status %v (%v)", effective.Status, err)
	}
	s, err = compile(t, limitedRoute, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = yaml.Marshal(s.File)
	if !strings.Contains(string(b), "local_limit: 911") {
		t.Fatalf("the effective configuration does not show the default status:\n%s", b)
	}

	for _, c := range []struct {
		yaml      string
		line, col int
		want      string
	}{
		{"listen: :8080\nstatus: {local_limt: 429}\n", 2, 10, `unknown setting "status.local_limt"`},
		{"listen: :8080\nstatus: {local_limit: 42}\n", 2, 9, "status.local_limit 42 is not an HTTP status"},
		{"listen: :8080\nstatus: {cluster_limit: nine}\n", 2, 0, "cannot unmarshal"},
	} {
		_, err := compile(t, c.yaml, noEnv)
		var ce *Error
		if !errors.As(err, &ce) || ce.Line != c.line || (c.col != 0 && ce.Col != c.col) || !strings.Contains(ce.Msg, c.want) {
			t.Errorf("%q: %v, want %d:%d %q", c.yaml, err, c.line, c.col, c.want)
		}
	}
}

// TestTiersSectionIsTheLimiters: tiers are decoded and provisioned by the
// limiter, which resolves the consumers' quotas; the effective
// configuration shows the default tiers.
func TestTiersSectionIsTheLimiters(t *testing.T) {
	s, err := compile(t, "tiers: {gold: 500}\nconsumers:\n  - {app_key: a, secret: "+strings.Repeat("s", 32)+", tier: gold}\n", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := yaml.Marshal(s.File)
	var effective struct {
		Tiers map[string]int `yaml:"tiers"`
	}
	if err := yaml.Unmarshal(b, &effective); err != nil || effective.Tiers["gold"] != 500 || effective.Tiers["free"] != 10 {
		t.Fatalf("effective tiers %v (%v)", effective.Tiers, err)
	}
	_, err = compile(t, "tiers: {gold: 500}\nconsumers:\n  - {app_key: a, secret: "+strings.Repeat("s", 32)+", tier: silver}\n", noEnv)
	var ce *Error
	if !errors.As(err, &ce) || ce.Line != 1 || !strings.Contains(ce.Msg, `consumer "a": tier "silver" is not defined in tiers`) {
		t.Fatalf("error %v", err)
	}
}
