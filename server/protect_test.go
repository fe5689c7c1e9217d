package server_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
)

// TestBreakerDegradesAndRecovers: a failing backend trips the route's
// breaker; while open, the degraded answer comes back at once and nothing
// reaches the backend; after recovery the half-open probes close it.
func TestBreakerDegradesAndRecovers(t *testing.T) {
	cfg := `
services:
  up: {instances: [{addr: "${UP}"}], health: {eject_after: 1000}}
routes:
  - name: items
    match: {prefix: /items}
    breaker: {min_requests: 5, open_for: 300ms, half_open_probes: 2}
    degrade: {status: 200, body: '{"items":[],"degraded":true}'}
    service: up
  - name: feed
    match: {prefix: /feed}
    breaker: {min_requests: 5, open_for: 1h}
    degrade: {cache: true, max_age: 1m}
    service: up
`
	up := testutil.StartUpstream(t, `{"items":[1,2]}`)
	g := gatewaytest.Start(t, cfg, gatewaytest.Options{Vars: map[string]string{"UP": up.Addr}})
	get := func(path string) (int, string, string, time.Duration) {
		start := time.Now()
		res := testutil.RawExchange(t, g.Addr, []byte("GET "+path+" HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"), 1, 2*time.Second)
		took := time.Since(start)
		if len(res.Responses) != 1 {
			t.Fatalf("%s: no answer", path)
		}
		r := res.Responses[0]
		return r.StatusCode(), string(r.Body()), string(r.Header.Peek("X-Degraded")), took
	}
	// A good answer for the feed, cached.
	if st, body, _, _ := get("/feed"); st != 200 || body != `{"items":[1,2]}` {
		t.Fatalf("feed: %d %s", st, body)
	}
	up.Status.Store(500)
	for range 5 {
		get("/items")
		get("/feed")
	}
	seen := up.Requests.Load()
	for range 20 {
		st, body, _, took := get("/items")
		if st != 200 || body != `{"items":[],"degraded":true}` {
			t.Fatalf("open breaker: %d %s", st, body)
		}
		// The exchange includes a TCP connect; the answer itself is local.
		if took > 50*time.Millisecond {
			t.Fatalf("a degraded answer took %v", took)
		}
		st, body, hdr, _ := get("/feed")
		if st != 200 || body != `{"items":[1,2]}` || hdr != "cache" {
			t.Fatalf("cached degrade: %d %s %q", st, body, hdr)
		}
	}
	if n := up.Requests.Load() - seen; n != 0 {
		t.Fatalf("%d requests reached the backend while the breakers were open", n)
	}
	up.Status.Store(0)
	deadline := time.Now().Add(3 * time.Second)
	for {
		time.Sleep(50 * time.Millisecond)
		if _, body, _, _ := get("/items"); body == `{"items":[1,2]}` {
			if _, body, _, _ = get("/items"); body == `{"items":[1,2]}` {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the breaker did not close after the backend recovered")
		}
	}
}
