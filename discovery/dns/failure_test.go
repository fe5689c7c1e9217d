package dns

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

var stockA = []string{"local=/test/", "local-ttl=1", "host-record=stock.test,10.2.0.1"}

func TestAFrozenServerFailsAndNeverEmptiesTheSet(t *testing.T) {
	t.Parallel()
	d := testutil.StartDNSMasq(t, stockA...)
	w := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: stock.test, port: 80}"))
	if got := addrs(w.nextUpdate(t, 3*time.Second, false)); got != "10.2.0.1:80/1" {
		t.Fatalf("first set %q", got)
	}
	d.Freeze()
	err := w.nextFail(t, 3*time.Second)
	if !strings.Contains(err.Error(), d.Addr+": no answer within 300ms") {
		t.Errorf("failure %q does not say which server timed out", err)
	}
	// Frozen for longer than max_ttl: failures, retried, never an update.
	time.Sleep(2500 * time.Millisecond)
	if n, fails := w.counts(); n != 1 || fails < 2 {
		t.Fatalf("while frozen: %d updates (want 1) and %d failures (want >= 2)", n, fails)
	}
	d.Thaw()
	// Resolution resumes: a change made after the thaw is seen.
	d.SetConfig("local=/test/", "local-ttl=1", "host-record=stock.test,10.2.0.7")
	if got := addrs(w.nextUpdate(t, 4*time.Second, true)); got != "10.2.0.7:80/1" {
		t.Fatalf("after the thaw: set %q", got)
	}
}

func TestAStoppedServerFailsAndResolutionResumesWhenBack(t *testing.T) {
	t.Parallel()
	d := testutil.StartDNSMasq(t, stockA...)
	w := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: stock.test, port: 80}"))
	w.nextUpdate(t, 3*time.Second, false)
	d.Kill()
	w.nextFail(t, 3*time.Second)
	time.Sleep(1500 * time.Millisecond)
	if n, _ := w.counts(); n != 1 {
		t.Fatalf("%d updates while the server was down, want none after the first", n)
	}
	d.SetConfig("local=/test/", "local-ttl=1", "host-record=stock.test,10.2.0.8")
	if got := addrs(w.nextUpdate(t, 4*time.Second, true)); got != "10.2.0.8:80/1" {
		t.Fatalf("after the restart: set %q", got)
	}
	// Back to answers: no more failures.
	w.drainFails()
	time.Sleep(1500 * time.Millisecond)
	select {
	case err := <-w.fails:
		t.Errorf("failure %v after the server came back", err)
	default:
	}
}

func TestTheNextServerAnswersWhenTheFirstDoesNot(t *testing.T) {
	t.Parallel()
	frozen := testutil.StartDNSMasq(t, "local=/test/", "host-record=stock.test,10.9.9.9")
	frozen.Freeze()
	live := testutil.StartDNSMasq(t, stockA...)
	for name, first := range map[string]string{"frozen": frozen.Addr, "refused": deadAddr(t)} {
		t.Run(name, func(t *testing.T) {
			w := startWatch(t, mustTarget(t, servers(first, live.Addr), "{from: dns, name: stock.test, port: 80}"))
			if got := addrs(w.nextUpdate(t, 3*time.Second, false)); got != "10.2.0.1:80/1" {
				t.Fatalf("set %q, want the second server's", got)
			}
		})
	}
}

func TestNXDOMAINIsAnEmptySetNotAFailure(t *testing.T) {
	t.Parallel()
	d := testutil.StartDNSMasq(t, stockSRV...)
	missing := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: _http._tcp.gone.test}"))
	if set := missing.nextUpdate(t, 3*time.Second, false); set == nil || len(set) != 0 {
		t.Fatalf("NXDOMAIN: update(%#v), want an empty, non-nil set", set)
	}
	time.Sleep(1500 * time.Millisecond) // asked again after min_ttl, max_ttl
	if n, fails := missing.counts(); n != 1 || fails != 0 {
		t.Fatalf("NXDOMAIN again and again: %d updates (want 1), %d failures (want 0)", n, fails)
	}
	// A name that disappears empties the set: the registry said so.
	w := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: _http._tcp.stock.test}"))
	if set := w.nextUpdate(t, 3*time.Second, false); len(set) != 3 {
		t.Fatalf("first set %q", addrs(set))
	}
	d.SetConfig("local=/test/", "local-ttl=1")
	if set := w.nextUpdate(t, 3*time.Second, true); len(set) != 0 {
		t.Fatalf("after the records went: %q, want an empty set", addrs(set))
	}
}

func TestAServerErrorIsAFailure(t *testing.T) {
	t.Parallel()
	// Without local=/test/ and with no upstream, dnsmasq answers REFUSED.
	d := testutil.StartDNSMasq(t, "local-ttl=1")
	w := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: stock.test, port: 80}"))
	if err := w.nextFail(t, 3*time.Second); !strings.Contains(err.Error(), "answered Refused") {
		t.Errorf("failure %q, want it to name the REFUSED answer", err)
	}
}
