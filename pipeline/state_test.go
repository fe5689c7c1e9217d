package pipeline

import (
	"testing"
	"time"
)

func TestStateKeepsUnchangedDropsTheRest(t *testing.T) {
	s := NewState(time.Minute)
	var scheduled []func()
	s.after = func(_ time.Duration, f func()) { scheduled = append(scheduled, f) }
	closed := map[string]bool{}
	mk := func(key string) func() (any, func()) {
		return func() (any, func()) { return new(int), func() { closed[key] = true } }
	}

	b1 := s.Begin()
	a1 := b1.Get("a|v1", mk("a|v1"))
	b1.Get("b|v1", mk("b|v1"))
	b1.Commit()

	// A reload: a unchanged, b changed, c new.
	b2 := s.Begin()
	if a2 := b2.Get("a|v1", mk("a|v1")); a2 != a1 {
		t.Fatal("an unchanged rule got fresh state")
	}
	b2.Get("b|v2", mk("b|v2"))
	b2.Get("c|v1", mk("c|v1"))
	b2.Commit()
	if s.Len() != 3 {
		t.Fatalf("%d objects kept, want 3", s.Len())
	}
	if closed["b|v1"] || len(scheduled) != 1 {
		t.Fatalf("the dropped state must close after the grace period, not at once (closed %v, scheduled %d)", closed, len(scheduled))
	}
	scheduled[0]()
	if !closed["b|v1"] {
		t.Fatal("the dropped state was never closed")
	}

	// A refused reload: what only it made is closed at once, the live
	// state stays.
	b3 := s.Begin()
	b3.Get("a|v1", mk("a|v1"))
	b3.Get("d|v1", mk("d|v1"))
	b3.Abort()
	if !closed["d|v1"] || closed["a|v1"] || closed["c|v1"] || s.Len() != 3 {
		t.Fatalf("abort: closed %v, %d kept", closed, s.Len())
	}
}

func TestStateCloseReleasesEverything(t *testing.T) {
	s := NewState(time.Minute)
	closed := 0
	b := s.Begin()
	b.Get("a", func() (any, func()) { return new(int), func() { closed++ } })
	b.Get("b", func() (any, func()) { return new(int), nil })
	b.Commit()
	s.Close()
	if closed != 1 || s.Len() != 0 {
		t.Fatalf("closed %d objects and kept %d, want 1 and 0", closed, s.Len())
	}
}
