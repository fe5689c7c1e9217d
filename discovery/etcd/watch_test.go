package etcd

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tollgate/tollgate/discovery"
	"github.com/tollgate/tollgate/internal/testutil"
)

func settingsFor(e *testutil.Etcd, extra string) string {
	return fmt.Sprintf("endpoints: [%q]\ntimeout: 1s\ndial_timeout: 1s\n%s", e.Endpoint, extra)
}

func TestWatchFindsExistingThenAddedAndDeletedInstances(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	reg.add("orders", "127.0.0.1:8001", nil)
	reg.add("orders", "127.0.0.1:8002", nil)
	reg.add("stock", "127.0.0.1:9001", nil) // another service: never in orders' set
	p, _ := newTestProvider(t, settingsFor(e, ""))
	r := &recorder{}
	tg := watch(t, p, "orders", r)
	if got := tg.String(); got != "etcd /services/orders/" {
		t.Errorf("String() = %q", got)
	}

	took := r.waitFor(t, 5*time.Second, addrList(8001, 8002))
	t.Logf("existing instances reported %v after the start", took)

	reg.add("orders", "127.0.0.1:8003", nil)
	took = r.waitFor(t, 5*time.Second, addrList(8001, 8002, 8003))
	t.Logf("added instance reported within %v", took)

	reg.remove("orders", "127.0.0.1:8001")
	took = r.waitFor(t, 5*time.Second, addrList(8002, 8003))
	t.Logf("deleted instance gone within %v", took)

	// A value in the naming layout whose Op is Delete removes it too.
	reg.put("/services/orders/127.0.0.1:8002", `{"Op":1,"Addr":"127.0.0.1:8002"}`)
	r.waitFor(t, 5*time.Second, addrList(8003))

	if _, fails := r.counts(); fails != 0 {
		t.Errorf("fail called %d times against a healthy etcd: %v", fails, r.fails)
	}
}

func TestWatchDropsAnInstanceWhoseLeaseExpires(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	lease, err := reg.client.Grant(reg.ctx(), 2)
	if err != nil {
		t.Fatal(err)
	}
	reg.add("orders", "127.0.0.1:8001", nil)
	// Bound to a lease no one keeps alive: the instance died.
	reg.add("orders", "127.0.0.1:8002", nil, clientv3.WithLease(lease.ID))
	p, _ := newTestProvider(t, settingsFor(e, ""))
	r := &recorder{}
	watch(t, p, "orders", r)
	r.waitFor(t, 5*time.Second, addrList(8001, 8002))
	took := r.waitFor(t, 8*time.Second, addrList(8001))
	t.Logf("leased instance gone %v after the first set (TTL 2s)", took)
}

func TestWatchPassesMetadataAndWeight(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	reg.add("orders", "127.0.0.1:8001", map[string]any{
		"weight": 3, "zone": "eu-1", "canary": true, "tags": []string{"a", "b"},
	})
	reg.add("orders", "127.0.0.1:8002", map[string]any{"weight": "5"})
	reg.add("orders", "127.0.0.1:8003", "a string, as grpc-go users often write")
	p, _ := newTestProvider(t, settingsFor(e, ""))
	r := &recorder{}
	watch(t, p, "orders", r)
	r.waitFor(t, 5*time.Second, addrList(8001, 8002, 8003))
	r.mu.Lock()
	got := r.sets[len(r.sets)-1]
	r.mu.Unlock()
	want := []discovery.Instance{
		{Addr: "127.0.0.1:8001", Weight: 3, Meta: map[string]string{
			"weight": "3", "zone": "eu-1", "canary": "true", "tags": `["a","b"]`,
		}},
		{Addr: "127.0.0.1:8002", Weight: 5, Meta: map[string]string{"weight": "5"}},
		{Addr: "127.0.0.1:8003"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("instances\n got %+v\nwant %+v", got, want)
	}
}

// Frozen with SIGSTOP, etcd keeps its connections and answers nothing:
// the watch must say so within the timeout, keep quiet about the set,
// and report the whole set once etcd answers again.
func TestWatchReportsAFrozenEtcdAndRecovers(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	reg.add("orders", "127.0.0.1:8001", nil)
	reg.add("orders", "127.0.0.1:8002", nil)
	p, _ := newTestProvider(t, settingsFor(e, ""))
	r := &recorder{}
	watch(t, p, "orders", r)
	r.waitFor(t, 5*time.Second, addrList(8001, 8002))
	updatesBefore, _ := r.counts()

	e.Freeze()
	frozenAt := time.Now()
	testutil.Eventually(t, 5*time.Second, "fail after SIGSTOP", func() bool {
		_, fails := r.counts()
		return fails > 0
	})
	t.Logf("failure reported %v after SIGSTOP (timeout 1s)", time.Since(frozenAt))
	time.Sleep(3 * time.Second) // a few back-off rounds while frozen
	if got := r.setsSince(updatesBefore); len(got) != 0 {
		t.Fatalf("update called while etcd was frozen: %q", got)
	}

	e.Thaw()
	thawedAt := time.Now()
	testutil.Eventually(t, 15*time.Second, "a set after SIGCONT", func() bool {
		n, _ := r.counts()
		return n > updatesBefore
	})
	t.Logf("set reported again %v after SIGCONT", time.Since(thawedAt))
	for _, s := range r.setsSince(updatesBefore) {
		if s != addrList(8001, 8002) {
			t.Errorf("set after the freeze %q, want %q", s, addrList(8001, 8002))
		}
	}
	// And the watch follows changes again.
	reg.add("orders", "127.0.0.1:8003", nil)
	r.waitFor(t, 5*time.Second, addrList(8001, 8002, 8003))
}

// A stopped etcd refuses connections: failures, no set, then after the
// restart the watch sees the changes made since.
func TestWatchReportsAStoppedEtcdAndSeesChangesAfterItsRestart(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	reg.add("orders", "127.0.0.1:8001", nil)
	reg.add("orders", "127.0.0.1:8002", nil)
	p, _ := newTestProvider(t, settingsFor(e, ""))
	r := &recorder{}
	watch(t, p, "orders", r)
	r.waitFor(t, 5*time.Second, addrList(8001, 8002))
	updatesBefore, _ := r.counts()

	e.Kill()
	stoppedAt := time.Now()
	testutil.Eventually(t, 5*time.Second, "fail after the stop", func() bool {
		_, fails := r.counts()
		return fails > 0
	})
	t.Logf("failure reported %v after the stop", time.Since(stoppedAt))
	time.Sleep(2 * time.Second)
	if got := r.setsSince(updatesBefore); len(got) != 0 {
		t.Fatalf("update called while etcd was down: %q", got)
	}

	e.Restart()
	reg.remove("orders", "127.0.0.1:8001")
	reg.add("orders", "127.0.0.1:8003", nil)
	took := r.waitFor(t, 15*time.Second, addrList(8002, 8003))
	t.Logf("changes made after the restart seen within %v", took)
	for _, s := range r.setsSince(updatesBefore) {
		if s == "" {
			t.Errorf("an empty set was reported across the outage: %q", r.setsSince(updatesBefore))
		}
	}
}

// The watch starts from the listing's revision; when etcd has compacted
// past it meanwhile, the watch lists again and converges, with no
// failure reported.
func TestWatchConvergesAfterCompaction(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	reg.add("orders", "127.0.0.1:8001", nil)
	p, logs := newTestProvider(t, settingsFor(e, ""))
	r := &recorder{}
	// Hold the first update: the listing is done, the watch not begun.
	release := make(chan struct{})
	first := make(chan struct{}, 1)
	r.onEvery = func([]discovery.Instance) {
		select {
		case first <- struct{}{}:
			<-release
		default:
		}
	}
	watch(t, p, "orders", r)
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("no first set")
	}
	var rev int64
	for i := range 100 {
		reg.add("orders", fmt.Sprintf("127.0.0.1:%d", 8100+i%5), map[string]any{"n": i})
		rev = reg.put("/other/noise", fmt.Sprint(i))
	}
	reg.remove("orders", "127.0.0.1:8001")
	if _, err := reg.client.Compact(reg.ctx(), rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	close(release)
	took := r.waitFor(t, 5*time.Second, addrList(8100, 8101, 8102, 8103, 8104))
	t.Logf("converged %v after the compaction", took)
	if _, fails := r.counts(); fails != 0 {
		t.Errorf("compaction reported as a failure: %v", r.fails)
	}
	if logs.FilterMessageSnippet("compacted").Len() == 0 {
		t.Error("the watch never met the compaction: the test proves nothing")
	}
}

// Closing the provider ends its client: a watch still running reports
// failures instead of sets, and a new client is not made.
func TestClosedProviderReportsFailures(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	reg.add("orders", "127.0.0.1:8001", nil)
	p, _ := newTestProvider(t, settingsFor(e, ""))
	r := &recorder{}
	watch(t, p, "orders", r)
	r.waitFor(t, 5*time.Second, addrList(8001))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "fail after Close", func() bool {
		_, fails := r.counts()
		return fails > 0
	})
	if _, err := p.connect(); err != errClosed {
		t.Errorf("connect after Close: %v", err)
	}
}

// An etcd that is down when the gateway starts is a failure the watch
// reports and outlives, not an error of the configuration.
func TestWatchStartsWhileEtcdIsDown(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	reg.add("orders", "127.0.0.1:8001", nil)
	e.Kill()
	p, _ := newTestProvider(t, settingsFor(e, ""))
	r := &recorder{}
	watch(t, p, "orders", r)
	testutil.Eventually(t, 5*time.Second, "fail while etcd is down", func() bool {
		_, fails := r.counts()
		return fails > 0
	})
	if n, _ := r.counts(); n != 0 {
		t.Fatalf("a set reported while etcd was down: %q", r.setsSince(0))
	}
	e.Restart()
	took := r.waitFor(t, 15*time.Second, addrList(8001))
	t.Logf("set reported %v after etcd came up", took)
}
