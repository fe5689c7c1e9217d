package pipeline

import (
	"sync"
	"time"
)

// State keeps the long-lived objects of features (nonce stores, limiter
// buckets, breaker windows, instance health, connection pools) across
// config reloads. An object is found by a key that names the rule and a
// digest of its settings: a reload that leaves a rule unchanged finds the
// same object and keeps its counters and connections; a changed rule gets
// a fresh one. Objects no snapshot uses any more are dropped when the new
// snapshot goes live, and closed once the requests of the old one have had
// time to finish (Grace).
//
// It is safe for concurrent use. Builds are expected one at a time (the
// config compiler serializes them).
type State struct {
	// Grace is how long a dropped object stays usable before its close
	// function runs: at least the longest a request may take.
	Grace time.Duration

	mu    sync.Mutex
	items map[string]*stateItem
	// after is how closes are scheduled; tests replace it.
	after func(time.Duration, func())
}

type stateItem struct {
	v     any
	close func()
	// live: used by the live snapshot; next: used by the build in progress.
	live, next bool
}

// NewState returns an empty State whose dropped objects close after grace.
func NewState(grace time.Duration) *State {
	return &State{Grace: grace, items: map[string]*stateItem{}, after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// StateBuild is the view of State one snapshot build has: the objects it
// asks for are kept if the build goes live.
type StateBuild struct {
	s    *State
	done bool
}

// Begin starts a build.
func (s *State) Begin() *StateBuild {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.items {
		it.next = false
	}
	return &StateBuild{s: s}
}

// Get returns the object under key, calling make (which returns it and the
// function that releases it, or nil) when there is none. make runs with
// no lock held on other keys' objects but must not call Get.
func (b *StateBuild) Get(key string, make func() (any, func())) any {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if it, ok := s.items[key]; ok {
		it.next = true
		return it.v
	}
	v, closeFn := make()
	s.items[key] = &stateItem{v: v, close: closeFn, next: true}
	return v
}

// Commit is called once the build's snapshot is live: objects it did not
// ask for are dropped, and closed after the grace period.
func (b *StateBuild) Commit() {
	b.finish(true)
}

// Abort is called when the build failed: objects only it asked for are
// dropped at once (no request can have used them); the live ones stay.
func (b *StateBuild) Abort() {
	b.finish(false)
}

func (b *StateBuild) finish(commit bool) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	for key, it := range s.items {
		keep := it.live
		if commit {
			keep = it.next
		}
		if keep {
			it.live = keep
			continue
		}
		delete(s.items, key)
		if it.close == nil {
			continue
		}
		if commit && it.live {
			s.after(s.Grace, it.close)
		} else {
			it.close()
		}
	}
}

// Len reports how many objects are kept.
func (s *State) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

// Close releases every object at once, for a process that is stopping
// after its last request: recordings are flushed, probes and lease workers
// stop. The State is empty afterwards.
func (s *State) Close() {
	s.mu.Lock()
	items := s.items
	s.items = map[string]*stateItem{}
	s.mu.Unlock()
	for _, it := range items {
		if it.close != nil {
			it.close()
		}
	}
}
