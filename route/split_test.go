package route

import (
	"fmt"
	"testing"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
	"github.com/valyala/fasthttp"
)

// TestCanaryShare: over 100,000 distinct user ids, a 5 % sticky canary gets
// 5 % ± 0.5 %.
func TestCanaryShare(t *testing.T) {
	const n = 100000
	in := 0
	for i := range n {
		if Bucket([]byte(fmt.Sprintf("user-%d", i))) < 500 {
			in++
		}
	}
	share := float64(in) / n * 100
	if share < 4.5 || share > 5.5 {
		t.Fatalf("canary share %.2f%%, want 5 ± 0.5", share)
	}
	t.Logf("canary share over %d ids: %.3f%%", n, share)
}

type named string

func (n named) Serve(c *pipeline.Ctx) { c.Resp.SetBodyString(string(n)) }

func TestSplitPicks(t *testing.T) {
	key, _ := source.Parse("header.X-User-Id")
	force, _ := source.Parse("cookie.version")
	s, err := NewSplit([]SplitTarget{{Name: "v2", Percent: 5, Action: named("v2")}, {Name: "v1", Percent: 95, Action: named("v1")}},
		&key, []source.Source{force})
	if err != nil {
		t.Fatal(err)
	}
	run := func(set func(*fasthttp.Request)) string {
		var req fasthttp.Request
		var resp fasthttp.Response
		set(&req)
		c := pipeline.AcquireParsed(&req, &resp)
		defer pipeline.Release(c)
		s.Serve(c)
		return string(resp.Body())
	}
	// Sticky: the same id always gets the same answer, and it is the one
	// the bucket says.
	for i := range 200 {
		id := fmt.Sprintf("id-%d", i)
		want := "v1"
		if Bucket([]byte(id)) < 500 {
			want = "v2"
		}
		for range 3 {
			if got := run(func(r *fasthttp.Request) { r.Header.Set("X-User-Id", id) }); got != want {
				t.Fatalf("%s: got %s, want %s", id, got, want)
			}
		}
	}
	if got := run(func(r *fasthttp.Request) { r.Header.Set("X-User-Id", "x"); r.Header.SetCookie("version", "v2") }); got != "v2" {
		t.Fatalf("force cookie ignored: %s", got)
	}
	if got := run(func(r *fasthttp.Request) { r.Header.SetCookie("version", "nope") }); got != "v1" && got != "v2" {
		t.Fatalf("unknown force value: %s", got)
	}
	if _, err := NewSplit([]SplitTarget{{Name: "a", Percent: 50}, {Name: "b", Percent: 40}}, nil, nil); err == nil {
		t.Fatal("shares adding to 90 accepted")
	}
}
