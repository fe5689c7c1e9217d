package discovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// scripted is a Target whose registry answers are the test's: what the
// test sends on answers reaches the watch as the provider would report
// it. It tests what the watch makes of answers; the providers' tests run
// real registries.
type scripted struct {
	name    string
	answers chan any // []Instance or error
	taken   chan struct{}
}

func newScripted(name string) *scripted {
	return &scripted{name: name, answers: make(chan any), taken: make(chan struct{})}
}

func (s *scripted) String() string { return "scripted " + s.name }

func (s *scripted) Watch(ctx context.Context, update func([]Instance), fail func(error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-s.answers:
			switch a := a.(type) {
			case error:
				fail(a)
			case []Instance:
				update(a)
			}
			s.taken <- struct{}{}
		}
	}
}

func (s *scripted) send(t *testing.T, a any) {
	t.Helper()
	select {
	case s.answers <- a:
		<-s.taken // the watch has dealt with it
	case <-time.After(5 * time.Second):
		t.Fatal("the watch does not take answers")
	}
}

func addrs(s *Set) []string {
	if s == nil {
		return nil
	}
	out := []string{}
	for _, in := range s.Instances {
		out = append(out, in.Addr)
	}
	return out
}

func waitSet(t *testing.T, w *Watch, want ...string) *Set {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := w.Current()
		if got := addrs(s); s != nil && equalStrings(got, want) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("set %v, want %v", addrs(s), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWatchKeepsTheLastSetThroughFailures(t *testing.T) {
	t.Parallel()
	tg := newScripted("orders")
	w := startWatch(tg, time.Hour, 0, "", zap.NewNop())
	defer w.close()
	tg.send(t, []Instance{{Addr: "10.0.0.2:80"}, {Addr: "10.0.0.1:80", Weight: 3}})
	s := waitSet(t, w, "10.0.0.1:80", "10.0.0.2:80")
	if s.Instances[0].Weight != 3 || s.Instances[1].Weight != 1 {
		t.Fatalf("weights %+v", s.Instances)
	}
	for range 3 {
		tg.send(t, errors.New("connection refused"))
	}
	tg.send(t, []Instance{{Addr: "10.0.0.1:80", Weight: 3}, {Addr: "10.0.0.2:80"}}) // the same set, reordered
	st := w.Status()
	if got := w.Current(); got.Gen != s.Gen || st.Failures != 3 || st.Changes != 1 || st.Failing {
		t.Fatalf("after failures and the same set: gen %d→%d, status %+v", s.Gen, got.Gen, st)
	}
}

func TestWatchHoldsAnEmptyAnswerForTheGrace(t *testing.T) {
	t.Parallel()
	tg := newScripted("orders")
	w := startWatch(tg, 300*time.Millisecond, 0, "", zap.NewNop())
	defer w.close()
	tg.send(t, []Instance{{Addr: "10.0.0.1:80"}})
	waitSet(t, w, "10.0.0.1:80")

	// An empty answer that a set follows within the grace never shows.
	tg.send(t, []Instance{})
	if st := w.Status(); st.EmptySince.IsZero() || st.Instances != 1 {
		t.Fatalf("empty answer not held: %+v", st)
	}
	tg.send(t, []Instance{{Addr: "10.0.0.1:80"}, {Addr: "10.0.0.3:80"}})
	waitSet(t, w, "10.0.0.1:80", "10.0.0.3:80")
	time.Sleep(400 * time.Millisecond)
	waitSet(t, w, "10.0.0.1:80", "10.0.0.3:80")

	// One that lasts empties the service after the grace, not before.
	start := time.Now()
	tg.send(t, []Instance{})
	tg.send(t, []Instance{}) // repeated: the grace is not extended
	waitSet(t, w)
	if held := time.Since(start); held < 250*time.Millisecond {
		t.Fatalf("emptied after %v, before the grace", held)
	}
}

func TestWatchWithoutGraceEmptiesAtOnce(t *testing.T) {
	t.Parallel()
	tg := newScripted("orders")
	w := startWatch(tg, 0, 0, "", zap.NewNop())
	defer w.close()
	tg.send(t, []Instance{{Addr: "10.0.0.1:80"}})
	waitSet(t, w, "10.0.0.1:80")
	tg.send(t, []Instance{})
	waitSet(t, w)
}

func TestWatchStartsFromTheSavedSet(t *testing.T) {
	t.Parallel()
	path := savedPath(t.TempDir(), "scripted orders|x")
	tg := newScripted("orders")
	w := startWatch(tg, time.Hour, 0, path, zap.NewNop())
	tg.send(t, []Instance{{Addr: "10.0.0.1:80", Meta: map[string]string{"version": "v2"}}, {Addr: "10.0.0.2:80", Weight: 5}})
	waitSet(t, w, "10.0.0.1:80", "10.0.0.2:80")
	w.close()

	// A node restarted while the registry is down serves the saved set.
	down := newScripted("orders")
	w2 := startWatch(down, time.Hour, 0, path, zap.NewNop())
	defer w2.close()
	s := w2.Current()
	if got := addrs(s); !equalStrings(got, []string{"10.0.0.1:80", "10.0.0.2:80"}) || !s.Saved ||
		s.Instances[0].Meta["version"] != "v2" || s.Instances[1].Weight != 5 {
		t.Fatalf("restarted with %+v", s)
	}
	down.send(t, errors.New("dial tcp: connection refused"))
	if w2.Current() != s {
		t.Fatal("a failure replaced the saved set")
	}
	// The registry's first answer replaces it, even when it lists the
	// same instances (it is no longer a copy).
	down.send(t, []Instance{{Addr: "10.0.0.1:80", Meta: map[string]string{"version": "v2"}}, {Addr: "10.0.0.2:80", Weight: 5}})
	deadline := time.Now().Add(5 * time.Second)
	for w2.Current().Saved && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if w2.Current().Saved {
		t.Fatal("the registry's answer did not replace the saved copy")
	}
}

func TestSavedSetOfAnotherTargetIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := savedPath(dir, "etcd orders|1"), savedPath(dir, "etcd orders|2")
	if a == b {
		t.Fatal("two targets share a file")
	}
	if err := save(a, []Instance{{Addr: "10.0.0.1:80"}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := loadSaved(a, zap.NewNop()); !ok {
		t.Fatal("own copy refused")
	}
	if err := copyFile(a, b); err != nil {
		t.Fatal(err)
	}
	if _, ok := loadSaved(b, zap.NewNop()); ok {
		t.Fatal("a copy of another target's file was taken")
	}
	if _, ok := loadSaved(filepath.Join(dir, "none.json"), zap.NewNop()); ok {
		t.Fatal("a missing file gave a set")
	}
	// A copy past the bound is not read whole: padded with blanks before
	// its (valid) contents, it is refused.
	own, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a, append([]byte(strings.Repeat(" ", maxSavedBytes)), own...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := loadSaved(a, zap.NewNop()); ok {
		t.Fatal("a saved copy larger than the bound was read")
	}
}

func TestWeightsAreBoundedKeepingRatios(t *testing.T) {
	set := normalize([]Instance{{Addr: "a:1", Weight: 65535}, {Addr: "b:1", Weight: 6553}, {Addr: "c:1", Weight: 0}, {Addr: "a:1", Weight: 7},
		{Addr: "no-port"}, {Addr: ":80"}, {Addr: "d:0"}, {Addr: "d:65536"}, {Addr: "d:http"}})
	if len(set) != 3 || set[0].Weight != 100 || set[1].Weight != 9 || set[2].Weight != 1 {
		t.Fatalf("normalized %+v", set)
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

func TestASetBeyondTheBoundIsAFailure(t *testing.T) {
	t.Parallel()
	tg := newScripted("orders")
	w := startWatch(tg, time.Hour, 2, "", zap.NewNop())
	defer w.close()
	tg.send(t, []Instance{{Addr: "10.0.0.1:80"}})
	waitSet(t, w, "10.0.0.1:80")
	tg.send(t, []Instance{{Addr: "10.0.0.1:80"}, {Addr: "10.0.0.2:80"}, {Addr: "10.0.0.3:80"}})
	if st := w.Status(); st.Instances != 1 || !st.Failing || !strings.Contains(st.LastError, "max_instances") {
		t.Fatalf("an oversized set: %+v", st)
	}
}
