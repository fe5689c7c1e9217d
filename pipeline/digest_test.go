package pipeline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/digestcheck"
)

type digestInner struct {
	Path  string
	Every time.Duration
}

type digestSample struct {
	Name    string
	Weight  int
	Share   float64
	On      bool
	Probe   *digestInner
	Inner   digestInner
	Codes   []int
	Headers map[string]string
	Any     any
	Line    int `digest:"-"`
	hidden  int
}

func TestDigestSeesEveryField(t *testing.T) {
	digestcheck.EveryField(t, digestSample{Name: "a", Headers: map[string]string{"k": "v"}}, Digest)
	digestcheck.EveryField(t, &digestSample{Probe: &digestInner{Path: "/"}}, Digest)
}

func TestDigestLeavesOutWhatIsMarked(t *testing.T) {
	a := digestSample{Name: "a", Line: 3, hidden: 1}
	b := digestSample{Name: "a", Line: 9, hidden: 2}
	if Digest(a) != Digest(b) {
		t.Fatal("the place a setting was written changed the digest")
	}
}

func TestDigestOfMapsIsOrderFree(t *testing.T) {
	m := map[string]int{}
	n := map[string]int{}
	for i := range 100 {
		m[fmt.Sprint(i)] = i
		n[fmt.Sprint(99-i)] = 99 - i
	}
	if Digest(m) != Digest(n) {
		t.Fatal("two equal maps have different digests")
	}
	if Digest([]string{"ab", "c"}) == Digest([]string{"a", "bc"}) {
		t.Fatal("strings run into each other")
	}
	if Digest((*digestInner)(nil)) == Digest(&digestInner{}) || Digest([]int(nil)) == Digest([]int{}) {
		t.Fatal("nil and empty are not told apart")
	}
}

func TestDigestRefusesWhatIsNoSetting(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "not a setting") {
			t.Fatalf("recovered %v", r)
		}
	}()
	Digest(struct{ F func() }{F: func() {}})
}

// failures is a testing.TB that keeps what it is told instead of failing.
type failures struct {
	testing.TB
	msgs []string
}

func (f *failures) Helper() {}
func (f *failures) Errorf(format string, a ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, a...))
}
func (f *failures) Fatalf(format string, a ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, a...))
}

// TestEveryFieldCatchesAFieldLeftOut: a hand-written digest that forgets
// a field is what the check exists to catch.
func TestEveryFieldCatchesAFieldLeftOut(t *testing.T) {
	handWritten := func(v any) string {
		s := v.(digestInner)
		return s.Path // Every forgotten
	}
	f := &failures{TB: t}
	digestcheck.EveryField(f, digestInner{Path: "/"}, handWritten)
	if len(f.msgs) != 1 || !strings.Contains(f.msgs[0], "Every") {
		t.Fatalf("reported %q, want Every alone", f.msgs)
	}
}
