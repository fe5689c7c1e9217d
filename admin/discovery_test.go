package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/observe"
	"go.uber.org/zap"
)

func TestDiscoveredInstancesShowWhereTheyCameFrom(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "orders.yaml")
	if err := os.WriteFile(list, []byte(`[{addr: "127.0.0.1:1", meta: {version: v2}}, {addr: "127.0.0.1:2"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.Parse("t", []byte(`
discovery: {cache_dir: `+dir+`}
services:
  orders: {discover: {from: file, name: `+list+`}}
  fixed: {instances: [{addr: "127.0.0.1:3"}]}
routes: [{name: all, match: {prefix: /}, service: orders}]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	comp := config.NewCompiler()
	defer comp.Close()
	snap, err := comp.Compile(f, "t")
	if err != nil {
		t.Fatal(err)
	}
	base := serveAdmin(t, Deps{Token: "tok", Snapshot: func() *config.Snapshot { return snap }, Logger: zap.NewNop(),
		Ops: Ops{Metrics: observe.NewMetrics()}})

	st, body := do(t, "GET", base+"/admin/instances", "tok")
	for _, want := range []string{
		`"source":"file ` + list + `"`, `"meta":{"version":"v2"}`, `"source":"file"`,
		`"discovery":{"orders":{"target":"file ` + list + `","instances":2`,
	} {
		if st != 200 || !strings.Contains(body, want) {
			t.Fatalf("/admin/instances lacks %s: %d %s", want, st, body)
		}
	}
	st, body = do(t, "GET", base+"/metrics", "tok")
	for _, want := range []string{
		`tollgate_discovery_instances{service="orders",target="file ` + list + `"} 2`,
		`tollgate_discovery_changes_total{service="orders",target="file ` + list + `"} 1`,
		`tollgate_discovery_failing{service="orders",target="file ` + list + `"} 0`,
	} {
		if st != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %s: %d", want, st)
		}
	}
	if strings.Contains(body, `tollgate_discovery_instances{service="fixed"`) {
		t.Fatal("a service written in the file reports a registry watch")
	}
}
