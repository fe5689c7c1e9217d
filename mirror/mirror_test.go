package mirror

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
)

const mirrorConfig = `
services:
  primary: {instances: [{addr: "${P}"}]}
  shadow:
    instances: [{addr: "${S}"}]
    timeouts: {connect: 200ms, read: 3s, total: 3s}
routes:
  - name: m
    match: {prefix: /}
    mirror: {service: shadow, sample: ${SAMPLE}, compare: true, ignore: [json.ts], queue: ${Q}, concurrency: 4}
    service: primary
`

func mirrorGateway(t *testing.T, primary, shadow string, sample float64, queue int) (*gatewaytest.Gateway, *Filter) {
	t.Helper()
	g := startGateway(t, mirrorConfig, map[string]string{"P": primary, "S": shadow,
		"SAMPLE": strconv.FormatFloat(sample, 'g', -1, 64), "Q": strconv.Itoa(queue)})
	return g, gatewaytest.Filter[*Filter](t, g, "m")
}

// settled waits until the mirror sent or gave up every copy it queued.
func settled(t *testing.T, m *Filter) Counts {
	t.Helper()
	var last Counts
	testutil.Eventually(t, 5*time.Second, "the mirror queue to drain", func() bool {
		c := m.Counts()
		done := len(m.pool.queue) == 0 && c == last
		last = c
		if !done {
			time.Sleep(50 * time.Millisecond)
		}
		return done
	})
	return last
}

func allOK(t *testing.T, what string, r gatewaytest.Result, n int) {
	t.Helper()
	if r.Errors != 0 || r.Statuses[200] != n {
		t.Fatalf("%s: clients got %v and %d errors, want %d × 200", what, r.Statuses, r.Errors, n)
	}
}

func TestMirrorSendsTheSampledShare(t *testing.T) {
	primary := testutil.StartUpstream(t, `{"v":1,"ts":1}`)
	shadow := testutil.StartUpstream(t, `{"v":1,"ts":2}`)
	g, m := mirrorGateway(t, primary.Addr, shadow.Addr, 0.3, 1024)
	const n = 1000
	res := gatewaytest.Drive(t, g.Addr, n, 8, gatewaytest.GetPath("/a?x=1"))
	allOK(t, "mirroring", res, n)
	c := settled(t, m)
	got := shadow.Requests.Load()
	if got < 230 || got > 370 || c.OK != uint64(got) || c.Dropped != 0 || c.Failed != 0 {
		t.Fatalf("sample 0.3 of %d: the shadow got %d, counts %+v", n, got, c)
	}
	// The copy is the request as forwarded, marked as a mirror's.
	seen := shadow.Last()
	if seen.URI != "/a?x=1" || seen.Header(Header) != "1" || seen.Header("X-Forwarded-For") == "" {
		t.Fatalf("the shadow saw %+v", seen)
	}
	// ts is ignored: the answers agree.
	if c.Compared != c.OK || c.BodyDiffers != 0 || c.StatusDiffers != 0 {
		t.Fatalf("compare: %+v", c)
	}
}

// TestMirrorDeadOrHangingChangesNothing: clients see the same statuses
// and no added latency whether the mirror service answers, is killed, or
// hangs; the copies it cannot take are counted.
func TestMirrorDeadOrHangingChangesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("waits on a hanging shadow")
	}
	primary := testutil.StartQuietUpstream(t, "ok")
	shadow := testutil.StartUpstream(t, "ok")
	g, m := mirrorGateway(t, primary.Addr, shadow.Addr, 1, 16)
	const n = 300
	base := gatewaytest.Drive(t, g.Addr, n, 4, gatewaytest.GetPath("/"))
	allOK(t, "healthy mirror", base, n)
	settled(t, m)

	shadow.Close()
	dead := gatewaytest.Drive(t, g.Addr, n, 4, gatewaytest.GetPath("/"))
	allOK(t, "killed mirror", dead, n)
	if c := settled(t, m); c.Failed == 0 {
		t.Fatalf("a dead mirror's failures are not counted: %+v", c)
	}

	hanging := testutil.StartUpstream(t, "ok")
	hanging.Delay.Store(int64(3 * time.Second))
	g2, m2 := mirrorGateway(t, primary.Addr, hanging.Addr, 1, 16)
	// A client that waited for the mirror would give up after a second.
	slow := gatewaytest.DriveWithin(t, g2.Addr, n, 4, time.Second, gatewaytest.GetPath("/"))
	allOK(t, "hanging mirror", slow, n)
	// Waiting on the mirror would cost every request 3 s.
	limit := max(50*time.Millisecond, 5*base.P99())
	if slow.P99() > limit || dead.P99() > limit {
		t.Fatalf("p99 %v with a healthy mirror, %v dead, %v hanging (limit %v)", base.P99(), dead.P99(), slow.P99(), limit)
	}
	if c := m2.Counts(); c.Dropped < n-16-4 {
		t.Fatalf("a hanging mirror's queue overflow is not counted: %+v", c)
	}
}

func TestCountsDifferences(t *testing.T) {
	primary := testutil.StartUpstream(t, `{"v":1,"ts":1}`)
	shadow := testutil.StartUpstream(t, `{"v":2,"ts":2}`)
	shadow.Status.Store(201)
	g, m := mirrorGateway(t, primary.Addr, shadow.Addr, 1, 1024)
	allOK(t, "compare", gatewaytest.Drive(t, g.Addr, 20, 2, gatewaytest.GetPath("/")), 20)
	if c := settled(t, m); c.Compared != 20 || c.BodyDiffers != 20 || c.StatusDiffers != 20 {
		t.Fatalf("differences not counted: %+v", c)
	}
}

func TestMirrorRuleErrors(t *testing.T) {
	for rule, want := range map[string]string{
		"{service: nope}":                      `mirror.service "nope" is not defined`,
		"{sample: 0.5}":                        "mirror.service is required",
		"{service: shadow, sample: 2}":         "mirror.sample 2",
		"{service: shadow, ignore: [ts]}":      "ignore \"ts\"",
		"{service: shadow, concurrency: 5000}": "mirror.concurrency 5000",
	} {
		yaml := strings.Replace(mirrorConfig, "{service: shadow, sample: ${SAMPLE}, compare: true, ignore: [json.ts], queue: ${Q}, concurrency: 4}", rule, 1)
		yaml = strings.NewReplacer("${P}", "127.0.0.1:1", "${S}", "127.0.0.1:2").Replace(yaml)
		if err := gatewaytest.CompileErr(yaml); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", rule, err, want)
		}
	}
	mock := "routes:\n  - name: m\n    match: {prefix: /}\n    mirror: {service: s}\n    mock: {responses: [{body: x}]}\nservices:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\n"
	if err := gatewaytest.CompileErr(mock); err == nil || !strings.Contains(err.Error(), "only to routes that forward") {
		t.Errorf("mirror on a mock: %v", err)
	}
}
