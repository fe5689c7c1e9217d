package history

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/internal/testutil"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// TestLocalSumsMinutesIntoHours: per route and hour, the requests and
// the busiest minute; only the last keep hours are kept.
func TestLocalSumsMinutesIntoHours(t *testing.T) {
	l := NewLocal(2)
	l.AddMinute(t0, map[string]uint64{"a": 10, "b": 1})
	l.AddMinute(t0.Add(time.Minute), map[string]uint64{"a": 30})
	l.AddMinute(t0.Add(59*time.Minute), map[string]uint64{"a": 5})
	l.AddMinute(t0.Add(time.Hour), map[string]uint64{"a": 7})
	hours := l.Hours(time.Time{})
	if len(hours) != 2 {
		t.Fatalf("%d hours", len(hours))
	}
	a := hours[0].Routes["a"]
	if a.Requests != 45 || a.PeakMinute != 30 || !a.PeakAt.Equal(t0.Add(time.Minute)) || hours[0].Routes["b"].Requests != 1 {
		t.Fatalf("first hour %+v", hours[0])
	}
	l.AddMinute(t0.Add(2*time.Hour), map[string]uint64{"a": 1})
	hours = l.Hours(time.Time{})
	if len(hours) != 2 || !hours[0].Start.Equal(t0.Add(time.Hour)) {
		t.Fatalf("kept %d hours from %v", len(hours), hours[0].Start)
	}
	if got := l.Hours(t0.Add(2 * time.Hour)); len(got) != 1 {
		t.Fatalf("since the last hour: %d hours", len(got))
	}
	// A minute from before the last hour (a clock stepped back) is dropped.
	l.AddMinute(t0, map[string]uint64{"a": 1000})
	if hours := l.Hours(time.Time{}); hours[0].Routes["a"].Requests != 7 {
		t.Fatalf("an old minute changed the history: %+v", hours)
	}
}

// TestRecorderCountsWhatEachMinuteAdded: the first reading counts
// nothing (its minute was not watched whole), later ones the difference;
// a total that went down (a route made anew by a reload) counts from zero.
func TestRecorderCountsWhatEachMinuteAdded(t *testing.T) {
	totals := map[string]uint64{"a": 100, "b": 5}
	l := NewLocal(0)
	r := &Recorder{Totals: func() map[string]uint64 {
		c := map[string]uint64{}
		for k, v := range totals {
			c[k] = v
		}
		return c
	}, Sinks: []Sink{l}}
	r.Tick(t0)
	totals["a"], totals["b"], totals["c"] = 160, 3, 4
	r.Tick(t0.Add(time.Minute))
	h := l.Hours(time.Time{})
	if len(h) != 1 {
		t.Fatalf("%d hours", len(h))
	}
	if a, b, c := h[0].Routes["a"], h[0].Routes["b"], h[0].Routes["c"]; a.Requests != 60 || b.Requests != 3 || c.Requests != 4 {
		t.Fatalf("counts %+v", h[0].Routes)
	}
}

// TestRedisSumsTheClusterMinute: two nodes write the same minutes; the
// hour in Redis has the requests of both and the busiest minute of their
// sum (not of either node), summed once however many nodes write.
func TestRedisSumsTheClusterMinute(t *testing.T) {
	rd := testutil.StartRedis(t)
	var sinks []*Redis
	for _, id := range []string{"n1", "n2"} {
		c, err := cluster.New(cluster.Options{Addrs: []string{rd.Addr}, NodeID: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		sinks = append(sinks, &Redis{Client: c})
	}
	// Minute k: node 1 takes 10+k on route a, node 2 takes 20-k: the
	// cluster's a is 30 every minute but the fifth, when node 2 has a
	// surge of 100 (cluster 110). Route b only on node 2.
	for k := 0; k < 8; k++ {
		m := t0.Add(time.Duration(k) * time.Minute)
		sinks[0].AddMinute(m, map[string]uint64{"a": uint64(10 + k)})
		n2 := map[string]uint64{"a": uint64(20 - k), "b": 1}
		if k == 5 {
			n2["a"] = 100 - 15 + uint64(20-k)
		}
		sinks[1].AddMinute(m, n2)
	}
	hours, err := ReadRedis(context.Background(), sinks[0].Client, t0.Add(-time.Hour), t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(hours) != 1 || !hours[0].Start.Equal(t0) {
		t.Fatalf("hours %+v", hours)
	}
	// Minutes 0..5 are summed (each minute sums the one two before it).
	a, b := hours[0].Routes["a"], hours[0].Routes["b"]
	if want := uint64(30*6 + 85); a.Requests != want || a.PeakMinute != 115 || !a.PeakAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("route a %+v, want %d requests, busiest minute 115 at %v", a, want, t0.Add(5*time.Minute))
	}
	if b.Requests != 6 || b.PeakMinute != 1 {
		t.Fatalf("route b %+v", b)
	}
	ttl, err := rd.Command("TTL", keyHour+strconv.FormatInt(t0.Unix()/3600, 10))
	if n, _ := strconv.Atoi(strings.TrimSpace(ttl)); err != nil || n <= 0 {
		t.Fatalf("the hour's key: TTL %q %v", ttl, err)
	}
}

// TestSuggestNeverBelowThePeak: the suggested rate covers the busiest
// minute with headroom, and the YAML names every route with its reasons.
func TestSuggestNeverBelowThePeak(t *testing.T) {
	hours := []Hour{
		{Start: t0, Routes: map[string]RouteHour{"orders": {Requests: 9000, PeakMinute: 600, PeakAt: t0.Add(7 * time.Minute)}, "tiny": {Requests: 1, PeakMinute: 1, PeakAt: t0}}},
		{Start: t0.Add(time.Hour), Routes: map[string]RouteHour{"orders": {Requests: 3000, PeakMinute: 120, PeakAt: t0.Add(70 * time.Minute)}}},
	}
	s := Suggest(hours, Options{Headroom: 1.5})
	if len(s) != 2 {
		t.Fatalf("%+v", s)
	}
	o := s[0]
	if o.Route != "orders" || o.Peak != 600 || o.Rate != 15 || o.Burst != 30 || o.Requests != 12000 || o.Hours != 2 || o.TypicalPeak != 600 {
		t.Fatalf("orders %+v", o)
	}
	for _, x := range s {
		if float64(x.Rate) < float64(x.Peak)/60 {
			t.Fatalf("%s: rate %d/s below its busiest minute's %d/min", x.Route, x.Rate, x.Peak)
		}
	}
	var b strings.Builder
	if err := WriteYAML(&b, s, Options{Headroom: 1.5}, "cluster", "the cluster's history", t0, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`- name: "orders"`, "busiest minute 2026-12-01 10:07: 600 requests (10/s)", "{by: route, rate: 15, per: 1s, burst: 30, scope: cluster}", `- name: "tiny"`, "rate: 1, per: 1s, burst: 2"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}
