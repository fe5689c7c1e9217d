package concurrency_test

import (
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/valyala/fasthttp"
)

// TestRouteGateParksThenRefuses: a route's own gate of one slot on one
// event loop. Requests over it park on the loop and each completion hands
// its slot to the next in line, so with a max_wait longer than the queue
// takes (4 × 100 ms) every request is answered; with a max_wait shorter
// than one backend answer, those past the first are refused.
func TestRouteGateParksThenRefuses(t *testing.T) {
	up := startSlotted(t, 8, 100*time.Millisecond)
	gw := gatewaytest.Start(t, `
workers: 1
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - {name: patient, match: {prefix: /patient}, service: up, concurrency: {limit: 1, max_wait: 1s}}
  - {name: hasty, match: {prefix: /hasty}, service: up, concurrency: {limit: 1, max_wait: 1ms}}
`, gatewaytest.Options{Vars: map[string]string{"UP": up.Addr}})
	burst := func(path string) map[int]int {
		statuses := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, _, err := fasthttp.GetTimeout(nil, gw.URL(path), 5*time.Second)
				if err != nil {
					st = -1
				}
				mu.Lock()
				statuses[st]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		return statuses
	}
	if got := burst("/patient"); got[200] != 4 {
		t.Errorf("patient route: statuses %v, want all four answered in turn", got)
	}
	if st := gateStatus(gw, "patient"); st.Waited == 0 || st.Refused != 0 || st.InFlight != 0 {
		t.Errorf("patient gate %+v: want requests admitted after waiting, none refused, none left in flight", st)
	}
	if got := burst("/hasty"); got[503] == 0 || got[200] == 0 || got[200]+got[503] != 4 {
		t.Errorf("hasty route: statuses %v, want the first answered and the rest refused", got)
	}
}
