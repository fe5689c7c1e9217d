package observe

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// parseExposition parses a scrape with the Prometheus text parser.
func parseExposition(t testing.TB, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, b)
	}
	return fams
}

func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for k, v := range labels {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

type fakeReq struct {
	req  fasthttp.Request
	resp fasthttp.Response
	loop int // the ID of the loop the request runs on; 0 for none
}

// idLoop is a loop known only by its ID: what Observe asks of a loop.
type idLoop struct {
	pipeline.Loop
	id int
}

func (l idLoop) ID() int { return l.id }

func observeOne(m *Metrics, f *fakeReq, route string, status int, took time.Duration, decision string, outcome pipeline.Outcome) {
	f.resp.SetStatusCode(status)
	c := pipeline.Acquire(&f.req, &f.resp)
	c.RouteName = route
	c.Start = time.Unix(1000, 0)
	c.BytesIn = 100
	c.Decision = decision
	c.Outcome = outcome
	if f.loop > 0 {
		c.Loop = idLoop{id: f.loop}
	}
	m.Observe(c, c.Start.Add(took))
	pipeline.Release(c)
}

func TestMetricsExpositionParsesAndCounts(t *testing.T) {
	m := NewMetrics()
	m.SetRoutes([]string{"orders", `we"ird\route`}, []string{"order-v1"})
	m.Reloaded(ReloadResult{At: time.Now(), OK: true, Reason: "start", Version: 1})
	m.AddSource(func(s *Scrape) {
		s.Gauge("tollgate_client_connections", "Open client connections.", 3, "state", "idle")
		s.Gauge("tollgate_client_connections", "Open client connections.", 2, "state", "active")
		s.Counter("tollgate_test_total", "A counter.", 7)
	})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each goroutine is a loop of its own (stripes 0, 3, 6 and 1):
			// the figures are the sums of every stripe.
			f := fakeReq{loop: 3 * g}
			f.resp.SetBodyString("hello")
			for i := range 250 {
				out := pipeline.Outcome{Service: "order-v1", Result: pipeline.ResultOK, Status: 200, Attempts: 1, Latency: 300 * time.Microsecond}
				observeOne(m, &f, "orders", 200, time.Duration(i+1)*10*time.Microsecond, "", out)
				if g < 2 {
					observeOne(m, &f, `we"ird\route`, 503, time.Millisecond, "breaker open", pipeline.Outcome{})
				}
			}
		}()
	}
	wg.Wait()
	var f fakeReq
	observeOne(m, &f, "", 400, time.Microsecond, "malformed request: obsolete line folding in header", pipeline.Outcome{})
	observeOne(m, &f, "", 404, time.Microsecond, "no route", pipeline.Outcome{})
	observeOne(m, &f, "gone", 200, time.Microsecond, "", pipeline.Outcome{}) // a route the table does not know yet

	var buf bytes.Buffer
	m.WritePrometheus(&buf)
	fams := parseExposition(t, buf.Bytes())
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"tollgate_requests_total", map[string]string{"route": "orders", "class": "2xx"}, 1000},
		{"tollgate_requests_total", map[string]string{"route": `we"ird\route`, "class": "5xx"}, 500},
		{"tollgate_requests_total", map[string]string{"route": "(none)", "class": "4xx"}, 2},
		{"tollgate_requests_total", map[string]string{"route": "gone", "class": "2xx"}, 1},
		{"tollgate_request_duration_seconds", map[string]string{"route": "orders"}, 1000},
		{"tollgate_upstream_duration_seconds", map[string]string{"service": "order-v1"}, 1000},
		{"tollgate_upstream_requests_total", map[string]string{"service": "order-v1", "result": "ok"}, 1000},
		{"tollgate_response_bytes_total", map[string]string{"route": "orders"}, 5000},
		{"tollgate_request_bytes_total", map[string]string{"route": "orders"}, 100000},
		{"tollgate_decisions_total", map[string]string{"decision": "breaker open", "code": "503"}, 500},
		{"tollgate_decisions_total", map[string]string{"decision": "no route", "code": "404"}, 1},
		{"tollgate_parse_errors_total", map[string]string{"kind": "obsolete line folding in header"}, 1},
		{"tollgate_config_reloads_total", map[string]string{"result": "ok"}, 1},
		{"tollgate_config_last_reload_successful", nil, 1},
		{"tollgate_client_connections", map[string]string{"state": "idle"}, 3},
		{"tollgate_test_total", nil, 7},
	}
	for _, c := range checks {
		got, ok := sample(fams, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if fams["tollgate_requests_total"].GetType() != dto.MetricType_COUNTER {
		t.Errorf("requests family type %v", fams["tollgate_requests_total"].GetType())
	}
	h := fams["tollgate_request_duration_seconds"]
	if h.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("latency family type %v", h.GetType())
	}
	for _, mm := range h.Metric {
		if len(mm.Histogram.Bucket) != NumBuckets {
			t.Fatalf("%d buckets, want %d", len(mm.Histogram.Bucket), NumBuckets)
		}
		if ub := mm.Histogram.Bucket[0].GetUpperBound(); ub != 50e-6 {
			t.Fatalf("first bound %v, want 50µs", ub)
		}
	}
	for _, want := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if fams[want] == nil {
			t.Errorf("%s missing", want)
		}
	}

	// A reload that drops a route drops its series.
	m.SetRoutes([]string{"orders"}, nil)
	buf.Reset()
	m.WritePrometheus(&buf)
	if strings.Contains(buf.String(), `route="gone"`) || strings.Contains(buf.String(), `service="order-v1"`) {
		t.Fatal("series of removed routes and services are still exposed")
	}
	if !strings.Contains(buf.String(), `tollgate_requests_total{route="orders",class="2xx"} 1000`) {
		t.Fatal("a kept route lost its count across the reload")
	}
}

// TestDecisionCountersShareTheirSums: decisions are counted in stripes and
// set into the exposed counters at scrape, and where several series share
// one counter (decisions past maxDecisions, a parse error kind at several
// statuses) it shows their sum, at every scrape.
func TestDecisionCountersShareTheirSums(t *testing.T) {
	m := NewMetrics()
	const fold = "malformed request: obsolete line folding in header"
	observe := func(loop int, decision string, status, times int) {
		f := fakeReq{loop: loop}
		for range times {
			observeOne(m, &f, "", status, time.Microsecond, decision, pipeline.Outcome{})
		}
	}
	observe(1, fold, 400, 2)
	observe(4, fold, 408, 1)
	for i := len(*m.decisions.Load()); i < maxDecisions; i++ {
		observe(0, "d"+strconv.Itoa(i), 403, 1)
	}
	observe(3, "late-a", 403, 2) // past the bound: "(other)"
	observe(6, "late-b", 403, 3)

	scrape := func() map[string]*dto.MetricFamily {
		var buf bytes.Buffer
		m.WritePrometheus(&buf)
		return parseExposition(t, buf.Bytes())
	}
	check := func(fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
		t.Helper()
		if got, ok := sample(fams, name, labels); !ok || got != want {
			t.Errorf("%s%v = %v (found %v), want %v", name, labels, got, ok, want)
		}
	}
	fams := scrape()
	check(fams, "tollgate_decisions_total", map[string]string{"decision": "(other)", "code": "403"}, 5)
	check(fams, "tollgate_parse_errors_total", map[string]string{"kind": "obsolete line folding in header"}, 3)
	check(fams, "tollgate_decisions_total", map[string]string{"decision": fold, "code": "408"}, 1)

	observe(7, "late-b", 403, 1)
	observe(2, fold, 400, 1)
	fams = scrape()
	check(fams, "tollgate_decisions_total", map[string]string{"decision": "(other)", "code": "403"}, 6)
	check(fams, "tollgate_parse_errors_total", map[string]string{"kind": "obsolete line folding in header"}, 4)

	got := map[string]uint64{}
	for _, d := range m.ReadDecisions() {
		got[d.Decision+" "+strconv.Itoa(d.Code)] = d.Count
	}
	if got["late-a 403"] != 2 || got["late-b 403"] != 4 || got[fold+" 400"] != 3 {
		t.Errorf("ReadDecisions: late-a %d, late-b %d, fold %d; want each its own count 2, 4, 3",
			got["late-a 403"], got["late-b 403"], got[fold+" 400"])
	}
}

func TestMetricsObserveAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates; make test runs allocation gates without it")
	}
	m := NewMetrics()
	m.SetRoutes([]string{"r"}, []string{"s"})
	var f fakeReq
	out := pipeline.Outcome{Service: "s", Result: pipeline.ResultOK, Status: 200, Attempts: 1, Latency: time.Millisecond}
	observeOne(m, &f, "r", 429, time.Millisecond, "limited", out) // first sight of the decision makes its series
	if n := testing.AllocsPerRun(1000, func() {
		observeOne(m, &f, "r", 200, time.Millisecond, "", out)
		observeOne(m, &f, "r", 429, time.Millisecond, "limited", out)
	}); n != 0 {
		t.Fatalf("Observe allocates %v per request", n)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := range 1000 {
		h.Observe(i%5, time.Duration(i+1)*time.Microsecond) // 1µs … 1ms, uniform, from five loops
	}
	s := h.Read()
	if s.Count() != 1000 {
		t.Fatalf("count %d", s.Count())
	}
	for _, c := range []struct {
		q      float64
		lo, hi time.Duration
	}{{0.5, 450 * time.Microsecond, 550 * time.Microsecond}, {0.99, 950 * time.Microsecond, time.Millisecond}, {0.04, 0, 50 * time.Microsecond}} {
		if got := s.Quantile(c.q); got < c.lo || got > c.hi {
			t.Errorf("q%v = %v, want %v…%v", c.q, got, c.lo, c.hi)
		}
	}
	h.Observe(7, time.Minute)
	s2 := h.Read()
	d := s2.Sub(&s)
	if d.Count() != 1 || d.Quantile(0.5) != 10*time.Second {
		t.Fatalf("delta %+v q50 %v", d.Counts, d.Quantile(0.5))
	}
	var empty HistogramSnapshot
	if empty.Quantile(0.99) != 0 {
		t.Fatal("empty quantile")
	}
}

func TestScrapeEscapesAndGroups(t *testing.T) {
	var s Scrape
	s.Gauge("g", "help with \\ and\nnewline", 1.5, "a", "x\"y\\z\nw")
	s.Counter("c_total", "c", 2)
	s.Gauge("g", "", 2, "a", "b")
	s.Gauge("g", "", 3) // wrong label count: dropped
	var buf bytes.Buffer
	_, _ = s.WriteTo(&buf)
	fams := parseExposition(t, buf.Bytes())
	if v, ok := sample(fams, "g", map[string]string{"a": "x\"y\\z\nw"}); !ok || v != 1.5 {
		t.Fatalf("escaped label: %v %v\n%s", v, ok, buf.String())
	}
	if len(fams["g"].Metric) != 2 || fams["c_total"].GetType() != dto.MetricType_COUNTER {
		t.Fatalf("families: %s", buf.String())
	}
}

// BenchmarkMetricsObserve is the per-request cost of the metrics observer:
// a proxied request on one route and service (the common case), and one
// refused with a decision. Each parallel goroutine is a loop of its own,
// so that with -cpu 2 the figures show what the loops' counts share.
func BenchmarkMetricsObserve(b *testing.B) {
	m := NewMetrics()
	routes := make([]string, 1000)
	for i := range routes {
		routes[i] = "route-" + strconv.Itoa(i)
	}
	m.SetRoutes(routes, []string{"s"})
	out := pipeline.Outcome{Service: "s", Result: pipeline.ResultOK, Status: 200, Attempts: 1, Latency: 250 * time.Microsecond}
	run := func(b *testing.B, spread bool, decision string) {
		b.ReportAllocs()
		var loops atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var f fakeReq
			c := pipeline.Acquire(&f.req, &f.resp)
			c.Loop = idLoop{id: int(loops.Add(1) - 1)}
			f.resp.SetStatusCode(200)
			c.Start = time.Now()
			c.BytesIn = 120
			c.Outcome = out
			c.Decision = decision
			end := c.Start.Add(400 * time.Microsecond)
			i := 0
			for pb.Next() {
				c.RouteName = routes[0]
				if spread {
					c.RouteName = routes[i%len(routes)]
				}
				i++
				m.Observe(c, end)
			}
		})
	}
	b.Run("one-route", func(b *testing.B) { run(b, false, "") })
	b.Run("1000-routes", func(b *testing.B) { run(b, true, "") })
	b.Run("refused", func(b *testing.B) { run(b, false, "rate limited") })
}
