package record

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// benchRequest is a signed-looking JSON POST with a 1 KiB body and the
// secrets a record masks.
func benchRequest(tb testing.TB) (*fasthttp.Request, *fasthttp.Response) {
	tb.Helper()
	body := `{"card":{"number":"4000056655665556"},"password":"hunter2-long-pass","pad":"` + strings.Repeat("p", 950) + `"}`
	raw := "POST /api/orders?page=2&card_no=4111111111111111 HTTP/1.1\r\nHost: api.example.com\r\n" +
		"Authorization: Bearer eyJhbGciOi.payload.sig-abcdef\r\nX-App-Key: demo-app\r\nX-Sign: " + strings.Repeat("ab12", 16) +
		"\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body
	req := new(fasthttp.Request)
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		tb.Fatal(err)
	}
	resp := new(fasthttp.Response)
	resp.Header.SetContentType("application/json")
	resp.SetBodyString(`{"order":1,"card":{"number":"4000056655665556"},"pad":"` + strings.Repeat("q", 980) + `"}`)
	resp.KeepBodyBuffer = true
	return req, resp
}

// serveOnce runs the recording step around a request as a chain does.
func serveOnce(r *Recorder, req *fasthttp.Request, resp *fasthttp.Response) {
	c := pipeline.AcquireParsed(req, resp)
	c.Start, c.RouteName = time.Now(), "r"
	r.Handle(c)
	r.HandleResponse(c)
	pipeline.Release(c)
}

// TestRecordPathAllocs gates the request path of recording: a request
// that is not sampled (or a route switched off) allocates nothing, and
// neither does taking, masking and queueing a sampled one once the pool is
// warm (here the queue is full, so each record goes straight back to the
// pool, as it does when the writer has written it).
func TestRecordPathAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates")
	}
	req, resp := benchRequest(t)
	off := false
	for name, rule := range map[string]Rule{
		"unsampled":    {Sample: 1e-15},
		"switched off": {On: &off},
		"sampled":      {Mask: []string{"query.card_no", "json.card.number"}},
	} {
		t.Run(name, func(t *testing.T) {
			r, _ := testRecorder(t, rule)
			r.w = &Writer{queue: make(chan *entry)} // full: nobody reads it
			serveOnce(r, req, resp)
			if n := testing.AllocsPerRun(1000, func() { serveOnce(r, req, resp) }); n != 0 {
				t.Fatalf("%.2f allocations per request", n)
			}
			if queued, dropped := r.Counts(); name == "sampled" && (queued != 0 || dropped != 1002) {
				t.Fatalf("queued %d, dropped %d", queued, dropped)
			}
		})
	}
}
