package tracing_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
	_ "github.com/tollgate/tollgate/features"
	"github.com/tollgate/tollgate/trace/tracing"
)

func load(t *testing.T, c *config.Compiler, tracingYAML string) (*config.Snapshot, error) {
	t.Helper()
	doc := "listen: 127.0.0.1:0\nservices:\n  s: {instances: [{addr: 127.0.0.1:1}]}\nroutes:\n  - {name: r, match: {prefix: /}, service: s}\n" + tracingYAML
	return c.Load("", []byte(doc), func(string) (string, bool) { return "", false })
}

// TestSectionKeepsTheExporterAcrossReloads: the same otlp settings find
// the running exporter (its queue and connection carry on); other
// settings get a new one, and the old one is released.
func TestSectionKeepsTheExporterAcrossReloads(t *testing.T) {
	c := config.NewCompiler()
	defer c.Close()
	a, err := load(t, c, "tracing: {otlp: {endpoint: 127.0.0.1:4317}, sample: 0.5}\n")
	if err != nil {
		t.Fatal(err)
	}
	c.Release(a)
	b, err := load(t, c, "tracing: {otlp: {endpoint: 127.0.0.1:4317}, sample: 0.1}\n")
	if err != nil {
		t.Fatal(err)
	}
	c.Release(b)
	ea, eb := tracing.Of(a.Env()).Exporter(), tracing.Of(b.Env()).Exporter()
	if ea == nil || ea != eb {
		t.Fatalf("exporters %p and %p: want one, kept", ea, eb)
	}
	d, err := load(t, c, "tracing: {otlp: {endpoint: 'http://127.0.0.1:4318', protocol: http}}\n")
	if err != nil {
		t.Fatal(err)
	}
	if e := tracing.Of(d.Env()).Exporter(); e == nil || e == ea {
		t.Fatal("new settings kept the old exporter")
	}
	none, err := load(t, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if tr := tracing.Of(none.Env()); tr == nil || tr.Exporter() != nil {
		t.Fatal("no tracing section: want a tracer that propagates and exports nothing")
	}
}

func TestSectionRefusesWhatItCannotUse(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tracing: {sample: 1.5}\n", "sample"},
		{"tracing: {otlp: {endpoint: x:1, protocol: thrift}}\n", "protocol"},
		{"tracing: {otlp: {endpoint: 'ftp://x', protocol: http}}\n", "endpoint"},
		{"tracing: {otlp: {endpoint: x:1, queue: -1}}\n", "queue"},
		{"tracing: {otlp: {endpoint: x:1}, sampel: 1}\n", "sampel"},
		{"tracing: {propagation: {read: [jaeger]}}\n", "jaeger"},
		{"tracing: {propagation: {write: []}}\n", "write"},
	} {
		_, err := load(t, config.NewCompiler(), tc.yaml)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", strings.TrimSpace(tc.yaml), err, tc.want)
		}
	}
}
