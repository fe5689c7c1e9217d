//go:build !race

package route

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/pipeline"
)

// TestMatchAllocs guards the hot-path rule: Match allocates nothing, on any
// path through the table (exact, prefix, regex, hosts lowered on the stack
// or too long for it, conditions, more candidates than the stack holds).
func TestMatchAllocs(t *testing.T) {
	table, reqs, _ := benchTable(t, 1000)
	var many []*Route
	for i := range 3 * maxCandidates {
		many = append(many, &Route{Name: "c" + strconv.Itoa(i), Path: "/", Kind: Prefix,
			When: &hdrIs{name: "X-N", val: strconv.Itoa(i)}})
	}
	many = append(many, &Route{Name: "last", Priority: -1, Path: "^/", Kind: Regex, Methods: []string{"PURGE"}})
	crowded, err := NewTable(many)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("Ab.", 120) + "V2.Docs.EXAMPLE.com:8443"
	for _, tc := range []struct {
		name  string
		table *Table
		reqs  []*pipeline.Ctx
		want  []string // checked here; benchTable checked its own requests
	}{
		{"mix", table, reqs, nil},
		{"upper-case host", table, []*pipeline.Ctx{ctxFor("GET", "T0.EXAMPLE.COM:8080", "/api/s0/items/1")}, []string{"r1"}},
		{"long host", table, []*pipeline.Ctx{ctxFor("GET", long, "/x")}, []string{"docs"}},
		{"IPv6 host", table, []*pipeline.Ctx{ctxFor("GET", "[::1]:8080", "/static/a.css")}, []string{"static"}},
		{"crowded", crowded, []*pipeline.Ctx{
			ctxFor("GET", "h", "/", "X-N", "90"),
			ctxFor("PURGE", "h", "/", "X-N", "none"),
		}, []string{"c90", "last"}},
	} {
		for i, want := range tc.want {
			if got := nameOf(tc.table.Match(tc.reqs[i])); got != want {
				t.Fatalf("%s: got %s, want %s", tc.name, got, want)
			}
		}
		if n := testing.AllocsPerRun(200, func() {
			for _, c := range tc.reqs {
				tc.table.Match(c)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per run", tc.name, n)
		}
	}
}
