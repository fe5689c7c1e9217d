package observe

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestScrapeHistogram: a histogram written by Scrape parses as one, with
// cumulative buckets, its sum and count.
func TestScrapeHistogram(t *testing.T) {
	var sc Scrape
	sc.Histogram("tollgate_redis_call_seconds", "Redis call latency.", []float64{0.001, 0.01}, []uint64{3, 2, 1}, 0.5, "op", "claim")
	sc.Counter("tollgate_x_total", "x", 7)
	var out bytes.Buffer
	if _, err := sc.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(out.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	h := fams["tollgate_redis_call_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 6 || h.GetSampleSum() != 0.5 || len(h.GetBucket()) != 3 ||
		h.GetBucket()[0].GetCumulativeCount() != 3 || h.GetBucket()[1].GetCumulativeCount() != 5 {
		t.Fatalf("parsed %v\n%s", h, out.String())
	}
}
