package pipeline

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// recorder is a filter that notes its calls in a shared log.
type recorder struct {
	name string
	log  *[]string
	stop bool
}

func (r *recorder) Handle(*Ctx) Verdict {
	*r.log = append(*r.log, r.name)
	if r.stop {
		return Stop
	}
	return Continue
}

func (r *recorder) HandleResponse(*Ctx) { *r.log = append(*r.log, r.name+"'") }

// plain has no response side.
type plain struct{ log *[]string }

func (p plain) Handle(*Ctx) Verdict { *p.log = append(*p.log, "plain"); return Continue }

func TestChainOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stopAt int // -1 = none
		want   string
	}{
		{"all run", -1, "a b plain c action c' b' a'"},
		{"b stops", 1, "a b b' a'"},
		{"a stops", 0, "a a'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			a := &recorder{name: "a", log: &log, stop: tc.stopAt == 0}
			b := &recorder{name: "b", log: &log, stop: tc.stopAt == 1}
			c := &recorder{name: "c", log: &log}
			ch := NewChain(ActionFunc(func(*Ctx) { log = append(log, "action") }), a, b, plain{&log}, c)
			ch.Run(&Ctx{})
			if got := strings.Join(log, " "); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCannedShape(t *testing.T) {
	var req fasthttp.Request
	var resp fasthttp.Response
	c := Acquire(&req, &resp)
	defer Release(c)
	copy(c.Trace.TraceHex[:], "0123456789abcdef0123456789abcdef")
	c.Reject(NewCanned(919, `cluster "limit" hit`))
	if resp.StatusCode() != 919 {
		t.Fatalf("status %d", resp.StatusCode())
	}
	want := `{"code":919,"message":"cluster \"limit\" hit","trace_id":"0123456789abcdef0123456789abcdef"}`
	if string(resp.Body()) != want {
		t.Fatalf("body %s, want %s", resp.Body(), want)
	}
	if string(resp.Header.ContentType()) != "application/json" {
		t.Fatalf("content type %q", resp.Header.ContentType())
	}
}

// counting is a filter doing a little real work (a header read) per call.
type counting struct{ n int }

var strAppKey = []byte("X-App-Key")

func (f *counting) Handle(c *Ctx) Verdict {
	if len(c.Req.Header.PeekBytes(strAppKey)) > 0 {
		f.n++
	}
	return Continue
}

func (f *counting) HandleResponse(c *Ctx) { f.n += c.Resp.StatusCode() & 1 }

func benchChain() (*Chain, *fasthttp.Request, *fasthttp.Response) {
	var req fasthttp.Request
	var resp fasthttp.Response
	req.Header.Set("X-App-Key", "demo-app")
	reject := NewCanned(911, "local limit")
	filters := []Filter{&counting{}, &counting{}, &counting{}, &counting{}, &counting{}}
	action := ActionFunc(func(c *Ctx) {
		if c.Trace.Flags == 0xff {
			c.Reject(reject)
			return
		}
		c.Resp.SetStatusCode(200)
		c.Resp.SetBodyString("ok")
	})
	return NewChain(action, filters...), &req, &resp
}

func runOnce(ch *Chain, req *fasthttp.Request, resp *fasthttp.Response) {
	c := Acquire(req, resp)
	ch.Run(c)
	Release(c)
}

func BenchmarkChain(b *testing.B) {
	ch, req, resp := benchChain()
	b.ReportAllocs()
	for b.Loop() {
		runOnce(ch, req, resp)
	}
}
