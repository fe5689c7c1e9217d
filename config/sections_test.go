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
		{"listen: :8080\nstatus: {cluster_limit: nine}\n", 2, 25, `expected a whole number, got "nine"`},
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

// TestUpstreamSectionFromEnv: the TOLLGATE_* settings of the upstream
// defaults land in the upstream section, over what the file wrote, and
// reach every service that sets none of its own; the effective
// configuration shows the services with their defaults written in.
func TestUpstreamSectionFromEnv(t *testing.T) {
	src := "upstream: {timeouts: {read: 2s, connect: 900ms}}\n" +
		"services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\n  own: {instances: [{addr: \"127.0.0.1:2\"}], max_conns: 3, timeouts: {total: 9s}}\n"
	s, err := compile(t, src, env(map[string]string{
		"TOLLGATE_CONNECT_TIMEOUT": "200ms", "TOLLGATE_TOTAL_TIMEOUT": "4s", "TOLLGATE_UPSTREAM_MAX_CONNS": "7",
	}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(s.File)
	if err != nil {
		t.Fatal(err)
	}
	type timeouts struct{ Connect, Read, Total string }
	type service struct {
		Timeouts  timeouts
		MaxConns  int `yaml:"max_conns"`
		Retry     *int
		Instances []struct{ Weight int }
	}
	var effective struct {
		Upstream struct {
			Timeouts         timeouts
			MaxConns         int `yaml:"max_conns"`
			MaxResponseBytes int `yaml:"max_response_bytes"`
		}
		Services map[string]service
	}
	if err := yaml.Unmarshal(b, &effective); err != nil {
		t.Fatal(err)
	}
	if u := effective.Upstream; u.Timeouts != (timeouts{"200ms", "2s", "4s"}) || u.MaxConns != 7 || u.MaxResponseBytes != 64<<20 {
		t.Fatalf("effective upstream section %+v", u)
	}
	if got := effective.Services["s"]; got.Timeouts != (timeouts{"200ms", "2s", "4s"}) || got.MaxConns != 7 ||
		got.Retry == nil || *got.Retry != 1 || len(got.Instances) != 1 || got.Instances[0].Weight != 1 {
		t.Fatalf("effective service s %+v\n%s", got, b)
	}
	if got := effective.Services["own"]; got.Timeouts != (timeouts{"200ms", "2s", "9s"}) || got.MaxConns != 3 {
		t.Fatalf("effective service own %+v", got)
	}
	for name, v := range map[string]string{"TOLLGATE_UPSTREAM_MAX_CONNS": "-1", "TOLLGATE_READ_TIMEOUT": "soon"} {
		if _, err := compile(t, src, env(map[string]string{name: v})); err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s=%s: %v", name, v, err)
		}
	}
	// A service's own error keeps its line (a value its type refuses, its
	// column too), a default or fallback naming no service its message.
	for _, tc := range []struct{ src, want string }{
		{"services:\n  a: {instances: [{addr: \"127.0.0.1:1\"}]}\n  b:\n    instances: [{addr: \"127.0.0.1:1\", weight: 0}]\n    timeouts: {connect: 6s}\n", "test.yaml:4: service \"b\": connect (6s) and read (3s) timeouts must fit within total (5s)"},
		{"services:\n  a:\n", "test.yaml:2:3: service \"a\" is empty"},
		{"services:\n  a:\n    instances: [{addr: \"127.0.0.1:1\"}]\n    timeouts: {read: soon}\n", "test.yaml:4:22: invalid duration \"soon\" (want e.g. \"250ms\", \"5s\")"},
		{"services:\n  a:\n    instances: [{addr: \"127.0.0.1:1\"}]\n    max_conns: many\n", `test.yaml:4:16: expected a whole number, got "many"`},
		{"upstream:\n  timeouts: {read: soon}\n", "test.yaml:2:20: invalid duration \"soon\" (want e.g. \"250ms\", \"5s\")"},
		{"services:\n  a: {instances: [{addr: \"127.0.0.1:1\"}]}\ndefault_service: b\n", "test.yaml:3:18: default_service \"b\" is not a defined service"},
		{"services:\n  a: {instances: [{addr: \"127.0.0.1:1\"}]}\nfallbacks: [{service: a}, {service: c}]\n", "test.yaml:3:37: fallbacks: service \"c\" is not defined"},
	} {
		if _, err := compile(t, tc.src, noEnv); err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %s", tc.src, err, tc.want)
		}
	}
}
