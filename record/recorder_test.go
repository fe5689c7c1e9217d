package record

import (
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

func allOK(t *testing.T, what string, r gatewaytest.Result, n int) {
	t.Helper()
	if r.Errors != 0 || r.Statuses[200] != n {
		t.Fatalf("%s: clients got %v and %d errors, want %d × 200", what, r.Statuses, r.Errors, n)
	}
}

const recordConfig = `
recording: {dir: "${DIR}", queue: ${Q}}
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - name: rec
    match: {prefix: /}
    record: {sample: 1}
    service: up
`

// TestRecordStalledWriterChangesNothing: with the disk writer stuck, the
// queue fills, requests are answered as fast as without recording, and
// every record that did not fit is counted as dropped.
func TestRecordStalledWriterChangesNothing(t *testing.T) {
	up := testutil.StartQuietUpstream(t, strings.Repeat("a", 1024))
	plain := startGateway(t, oneRoute, map[string]string{"UP": up.Addr})
	const n = 400
	body := strings.Repeat("b", 1024)
	post := func(_ int, req *fasthttp.Request) {
		req.Header.SetMethod("POST")
		req.SetRequestURI("/orders?x=1")
		req.Header.SetHost("api.test")
		req.SetBodyString(body)
	}
	base := gatewaytest.Drive(t, plain.Addr, n, 4, post)
	allOK(t, "without recording", base, n)

	release := stallWriter(t)
	defer release() // before the gateway's cleanup closes the writer
	g := startGateway(t, recordConfig, map[string]string{"UP": up.Addr, "DIR": t.TempDir(), "Q": "8"})
	rec := gatewaytest.Filter[*Recorder](t, g, "rec")
	res := gatewaytest.DriveWithin(t, g.Addr, n, 4, time.Second, post)
	allOK(t, "stalled writer", res, n)
	// The writer took what fits in its buffer before its first write stuck;
	// then the queue filled, and the rest was dropped.
	queued, dropped := rec.Counts()
	st := rec.Writer().Stats()
	if queued+dropped != n || dropped < n/2 || st.Dropped != dropped || st.Queued != 8 || st.Written != 0 {
		t.Fatalf("queued %d, dropped %d of %d; writer %+v", queued, dropped, n, st)
	}
	if limit := max(20*time.Millisecond, 5*base.P99()); res.P99() > limit {
		t.Fatalf("p99 %v with a stalled writer, %v without recording", res.P99(), base.P99())
	}
}

const oneRoute = `
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - name: plain
    match: {prefix: /}
    service: up
`
