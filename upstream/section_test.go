package upstream

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"
)

// provisionText provisions the upstream and services sections as config
// does, from their YAML text, in an environment that shares edge.
func provisionText(t *testing.T, upstreamText, servicesText string, edge *pipeline.Edge) (*pipeline.Env, error) {
	t.Helper()
	st := pipeline.NewState(time.Minute)
	env := &pipeline.Env{Now: time.Now, Logger: zap.NewNop(), State: st.Begin()}
	t.Cleanup(st.Close)
	pipeline.EdgeKey.Set(env, edge)
	for _, sec := range []struct{ key, text string }{{"upstream", upstreamText}, {"services", servicesText}} {
		s, ok := pipeline.LookupSection(sec.key)
		if !ok {
			t.Fatalf("section %s is not registered", sec.key)
		}
		cfg := s.Config()
		if err := yaml.Unmarshal([]byte(sec.text), cfg); err != nil {
			t.Fatal(err)
		}
		if err := s.Provision(env, cfg); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// TestServicesSectionIsTheRoutesWayToServices: what the services section
// shares is what routes are built from: a defined service's action (or
// a share of its instances), what its instances speak, and the forwarding
// step over the edge config shared.
func TestServicesSectionIsTheRoutesWayToServices(t *testing.T) {
	edge := &pipeline.Edge{Internal: codec.Internal{HeaderPrefixes: []string{"X-Own-"}}}
	env, err := provisionText(t, "timeouts: {read: 2s}\n",
		"web: {instances: [{addr: \"127.0.0.1:1\"}]}\nrpc: {protocol: grpc, instances: [{addr: \"127.0.0.1:2\"}]}\n"+
			"java: {protocol: dubbo, instances: [{addr: \"127.0.0.1:3\"}]}\n", edge)
	if err != nil {
		t.Fatal(err)
	}
	ups, ok := pipeline.UpstreamsKey.Get(env)
	if !ok {
		t.Fatal("the services section shared no Upstreams")
	}
	web := ServicesOf(env)["web"]
	if !ups.Has("web") || ups.Has("nope") || ups.Action("nope", nil) != nil {
		t.Fatal("Has or Action wrong for a service that is or is not defined")
	}
	if a, ok := ups.Action("web", nil).(*Service); !ok || a != web {
		t.Fatalf("Action(web) is %T, not the service", ups.Action("web", nil))
	}
	if a, ok := ups.Action("web", map[string]string{"v": "2"}).(*Service); !ok || a == nil {
		t.Fatal("a share by metadata is not a service's selection")
	}
	for service, want := range map[string]string{"rpc": "grpc", "web": "http", "java": "dubbo", "nope": ""} {
		if got := ups.Protocol(service); got != want {
			t.Fatalf("Protocol(%s) = %q, want %q", service, got, want)
		}
	}
	policy := &codec.HeaderPolicy{DropCookies: true}
	if f, ok := ups.Forwarding(policy).(*Forwarding); !ok || f.Edge != edge || f.Policy != policy {
		t.Fatalf("Forwarding %+v: not over the shared edge and the route's policy", ups.Forwarding(policy))
	}
	if in := web.Instances()[0]; in.pool.Read != 2*time.Second || in.pool.Connect != time.Second {
		t.Fatalf("the upstream section's defaults did not reach the instance: %+v", in.pool)
	}
}

// TestServicesSectionErrorsKeepTheirPlace: a service's error names the
// line the service was written at.
func TestServicesSectionErrorsKeepTheirPlace(t *testing.T) {
	_, err := provisionText(t, "", "web: {instances: [{addr: \"127.0.0.1:1\"}]}\napi:\n  balance: hash\n", &pipeline.Edge{})
	var placed *pipeline.PlacedError
	if !errors.As(err, &placed) || placed.Line != 3 || placed.Msg != `service "api" has no instances (write them, or discover them: discover: {from: etcd, name: api})` {
		t.Fatalf("error %v, want one at line 3", err)
	}
}
