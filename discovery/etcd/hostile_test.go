package etcd

import (
	"fmt"
	"github.com/tollgate/tollgate/pipeline"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// Whoever may write under the prefix may write anything: values that are
// not endpoints are skipped, logged and counted once, and the rest of the
// service is kept.
func TestWatchSkipsHostileValuesAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	reg.add("orders", "127.0.0.1:8001", nil)
	reg.add("orders", "127.0.0.1:8002", map[string]any{"weight": 2})
	huge := `{"Op":0,"Addr":"127.0.0.1:8009","Metadata":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}`
	bad := map[string]string{
		"/services/orders/garbage":   `{"Op":0,"Addr":`,
		"/services/orders/huge":      huge,
		"/services/orders/no-port":   `{"Op":0,"Addr":"127.0.0.1"}`,
		"/services/orders/bad-op":    `{"Op":7,"Addr":"127.0.0.1:8007"}`,
		"/services/orders/weight":    `{"Op":0,"Addr":"127.0.0.1:8008","Metadata":{"weight":-1}}`,
		"/services/orders/not-json":  "\x00\xff binary",
		"/services/orders/array":     `[1,2,3]`,
		"/services/orders/too-heavy": `{"Op":0,"Addr":"127.0.0.1:8006","Metadata":{"weight":"99999999999999999999"}}`,
	}
	for k, v := range bad {
		reg.put(k, v)
	}
	p, logs := newTestProvider(t, settingsFor(e, ""))
	r := &recorder{}
	watch(t, p, "orders", r)
	r.waitFor(t, 5*time.Second, addrList(8001, 8002))
	if got := p.SkippedValues(); got != uint64(len(bad)) {
		t.Errorf("skipped %d values, want %d", got, len(bad))
	}

	// During the watch: a good key turned to garbage leaves the set, a
	// huge value is skipped, a good one still arrives.
	reg.put("/services/orders/127.0.0.1:8001", `{"Op":0,"Addr":"127.0.0.1:8001"`)
	reg.put("/services/orders/huge2", huge)
	reg.add("orders", "127.0.0.1:8003", nil)
	r.waitFor(t, 5*time.Second, addrList(8002, 8003))
	wantSkipped := uint64(len(bad) + 2)
	if got := p.SkippedValues(); got != wantSkipped {
		t.Errorf("skipped %d values, want %d", got, wantSkipped)
	}
	if got := logs.FilterMessageSnippet("value skipped").Len(); got != int(wantSkipped) {
		t.Errorf("%d skip lines logged, want %d (once per key and revision)", got, wantSkipped)
	}
	for _, entry := range logs.FilterMessageSnippet("value skipped").All() {
		if line := fmt.Sprint(entry.ContextMap()); len(line) > 2000 {
			t.Errorf("a log line of %d bytes: the hostile value reached the log", len(line))
		}
	}

	// A new listing (after an outage) meets the same bad values: they
	// are neither logged nor counted again.
	e.Kill()
	testutil.Eventually(t, 5*time.Second, "fail after the stop", func() bool {
		_, fails := r.counts()
		return fails > 0
	})
	e.Restart()
	before, _ := r.counts()
	testutil.Eventually(t, 15*time.Second, "a set after the restart", func() bool {
		n, _ := r.counts()
		return n > before
	})
	if r.last() != addrList(8002, 8003) {
		t.Errorf("set after the restart %q", r.last())
	}
	if got := p.SkippedValues(); got != wantSkipped {
		t.Errorf("after a new listing: skipped %d, want still %d", got, wantSkipped)
	}
	// /metrics shows the count.
	var reported []float64
	p.Report(func(f *pipeline.Family, v float64, labels ...string) {
		if f.Name == "tollgate_discovery_etcd_skipped_values_total" && len(labels) == len(f.Labels) {
			reported = append(reported, v)
		}
	})
	if len(reported) != 1 || reported[0] != float64(wantSkipped) {
		t.Errorf("reported %v, want [%d]", reported, wantSkipped)
	}
}

// More big values than one answer may carry: the listing asks for fewer
// keys at a time instead of failing for ever.
func TestListingShrinksItsPagesForBigValues(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	reg.add("orders", "127.0.0.1:8001", nil)
	big := `{"Op":0,"Addr":"127.0.0.1:8009","Metadata":{"pad":"` + strings.Repeat("y", 1<<20) + `"}}`
	// 20 MiB under the prefix, over the 16 MiB an answer may have.
	for i := range 20 {
		reg.put(fmt.Sprintf("/services/orders/big-%02d", i), big)
	}
	reg.add("orders", "127.0.0.1:8002", nil)
	p, _ := newTestProvider(t, fmt.Sprintf("endpoints: [%q]\n", e.Endpoint))
	r := &recorder{}
	watch(t, p, "orders", r)
	r.waitFor(t, 15*time.Second, addrList(8001, 8002))
	if got := p.SkippedValues(); got != 20 {
		t.Errorf("skipped %d values, want 20", got)
	}
	if _, fails := r.counts(); fails != 0 {
		t.Errorf("fail called: %v", r.fails)
	}
}
