package discovery

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Set is a watched service's instances at one moment.
type Set struct {
	Instances []Instance
	// Gen counts the sets the watch published; it changes with every
	// new set.
	Gen uint64
	// Changed is when the watch published this set.
	Changed time.Time
	// Saved says the set was read from the disk copy at start, the
	// registry not having answered yet.
	Saved bool
}

// Watch keeps one target's current set: it runs the provider's watch in
// the background and decides what of it the services see. It is shared,
// through the reload-surviving state, by every configuration that asks
// the same provider the same thing, so a reload neither restarts the
// watch nor forgets the set.
type Watch struct {
	target Target
	grace  time.Duration
	maxSet int    // a larger set is a failure; 0: no bound
	cache  string // file the set is saved in; "" for none
	log    *zap.Logger
	cancel context.CancelFunc
	done   chan struct{}
	first  chan struct{} // closed once a set is known
	once   sync.Once

	cur atomic.Pointer[Set]

	// mu serializes what changes the published set and the subscribers.
	mu         sync.Mutex
	subs       map[int]func(Set)
	nextSub    int
	emptyTimer *time.Timer
	emptySince time.Time
	failing    bool
	lastErr    string
	lastFailAt time.Time

	changes, failures, emptyHeld atomic.Uint64
}

// startWatch starts watching t. The saved set, when there is one, is the
// current set until the registry answers.
func startWatch(t Target, grace time.Duration, maxSet int, cache string, log *zap.Logger) *Watch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watch{target: t, grace: grace, maxSet: maxSet, cache: cache, log: log.With(zap.String("target", t.String())),
		cancel: cancel, done: make(chan struct{}), first: make(chan struct{}), subs: map[int]func(Set){}}
	if saved, ok := loadSaved(cache, w.log); ok {
		w.publish(saved, true)
		w.log.Info("discovery: serving the saved set until the registry answers", zap.Int("instances", len(saved)))
	}
	go func() {
		defer close(w.done)
		t.Watch(ctx, w.update, w.fail)
	}()
	return w
}

// stillWatch returns a watch of t that never starts: what a build that
// only checks the configuration gets.
func stillWatch(t Target) *Watch {
	done := make(chan struct{})
	close(done)
	return &Watch{target: t, log: zap.NewNop(), cancel: func() {}, done: done, first: make(chan struct{}), subs: map[int]func(Set){}}
}

// Current returns the current set; nil until one is known.
func (w *Watch) Current() *Set { return w.cur.Load() }

// String names the target.
func (w *Watch) String() string { return w.target.String() }

// waitFirst waits up to d for a set to be known.
func (w *Watch) waitFirst(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.first:
	case <-t.C:
		w.log.Warn("discovery: no set yet; the service answers 503 until the registry answers", zap.Duration("waited", d))
	}
}

// Subscribe calls fn with the current set, when there is one, and with
// every set published after, one call at a time, until the returned
// function is called.
func (w *Watch) Subscribe(fn func(Set)) (cancel func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.nextSub
	w.nextSub++
	w.subs[id] = fn
	if s := w.cur.Load(); s != nil {
		fn(*s)
	}
	return func() {
		w.mu.Lock()
		delete(w.subs, id)
		w.mu.Unlock()
	}
}

// update is what the provider reports: the registry's set.
func (w *Watch) update(in []Instance) {
	if w.maxSet > 0 && len(in) > w.maxSet {
		w.fail(fmt.Errorf("the registry lists %d instances, more than max_instances (%d)", len(in), w.maxSet))
		return
	}
	set := normalize(in)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failing {
		w.failing = false
		w.log.Info("discovery: the registry answers again")
	}
	cur := w.cur.Load()
	if cur != nil && !cur.Saved && equalSets(cur.Instances, set) {
		w.stopEmptyTimer()
		return
	}
	if len(set) == 0 && cur != nil && len(cur.Instances) > 0 && w.grace > 0 {
		w.holdEmpty()
		return
	}
	w.stopEmptyTimer()
	w.publishLocked(set, false)
}

// holdEmpty starts the grace an empty answer waits out (once: a registry
// repeating the empty answer does not extend it).
func (w *Watch) holdEmpty() {
	if w.emptyTimer != nil {
		return
	}
	w.emptyHeld.Add(1)
	w.emptySince = time.Now()
	w.log.Warn("discovery: the registry lists no instance; the last set keeps serving for the grace period",
		zap.Duration("empty_grace", w.grace))
	w.emptyTimer = time.AfterFunc(w.grace, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.emptyTimer == nil { // a set came back meanwhile
			return
		}
		w.emptyTimer = nil
		w.emptySince = time.Time{}
		w.publishLocked(nil, false)
	})
}

func (w *Watch) stopEmptyTimer() {
	if w.emptyTimer != nil {
		w.emptyTimer.Stop()
		w.emptyTimer = nil
		w.emptySince = time.Time{}
	}
}

func (w *Watch) publish(set []Instance, saved bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.publishLocked(set, saved)
}

// publishLocked makes set the current one, logs and counts the change,
// saves it and tells the subscribers.
func (w *Watch) publishLocked(set []Instance, saved bool) {
	prev := w.cur.Load()
	next := &Set{Instances: set, Changed: time.Now(), Saved: saved}
	if prev != nil {
		next.Gen = prev.Gen + 1
	}
	w.cur.Store(next)
	w.once.Do(func() { close(w.first) })
	if saved {
		return
	}
	w.changes.Add(1)
	added, removed := diff(prev, set)
	w.log.Info("discovery: instance set changed", zap.Int("instances", len(set)),
		zap.Strings("added", added), zap.Strings("removed", removed))
	if err := save(w.cache, set); err != nil {
		w.log.Warn("discovery: saving the set failed; a restart during an outage would start without it", zap.Error(err))
	}
	for _, fn := range w.subs {
		fn(*next)
	}
}

// fail is what the provider reports when it cannot read the registry: the
// set stays.
func (w *Watch) fail(err error) {
	w.failures.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	msg := err.Error()
	// Logged when it starts failing, when the error changes, and once a
	// minute while it lasts: a registry down for an hour is 60 lines.
	if !w.failing || msg != w.lastErr || now.Sub(w.lastFailAt) >= time.Minute {
		w.log.Warn("discovery: the registry does not answer; the last set keeps serving", zap.Error(err))
		w.lastFailAt = now
	}
	w.failing, w.lastErr = true, msg
}

// close stops the watch.
func (w *Watch) close() {
	w.cancel()
	<-w.done
	w.mu.Lock()
	w.stopEmptyTimer()
	w.mu.Unlock()
}

// Status is what the admin API and the metrics show of a watch.
type Status struct {
	Target     string    `json:"target"`
	Instances  int       `json:"instances"`
	Changed    time.Time `json:"changed"`
	Saved      bool      `json:"from_saved_copy,omitempty"`
	Changes    uint64    `json:"changes"`
	Failures   uint64    `json:"failures"`
	Failing    bool      `json:"failing"`
	LastError  string    `json:"last_error,omitempty"`
	EmptySince time.Time `json:"empty_since,omitzero"`
}

// Status reports the watch's state.
func (w *Watch) Status() Status {
	st := Status{Target: w.target.String(), Changes: w.changes.Load(), Failures: w.failures.Load()}
	if s := w.cur.Load(); s != nil {
		st.Instances, st.Changed, st.Saved = len(s.Instances), s.Changed, s.Saved
	}
	w.mu.Lock()
	st.Failing, st.LastError, st.EmptySince = w.failing, w.lastErr, w.emptySince
	w.mu.Unlock()
	return st
}

// normalize sorts a set by address and writes the default weight in; two
// answers listing the same instances compare equal.
func normalize(in []Instance) []Instance {
	out := make([]Instance, 0, len(in))
	seen := map[string]bool{}
	for _, x := range in {
		if !validAddr(x.Addr) || seen[x.Addr] {
			continue // one entry per address (the registry's first), and only one that can be dialled
		}
		seen[x.Addr] = true
		if x.Weight <= 0 {
			x.Weight = 1
		}
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b Instance) int { return strings.Compare(a.Addr, b.Addr) })
	scaleWeights(out)
	return out
}

// MaxWeight bounds a discovered instance's weight. The balancers' work
// at a set change grows with the weights (a round-robin cycle, hash ring
// points), and a registry's weights are its writers' input: SRV weights
// go to 65535, an etcd value to anything. Weights above it are scaled
// down together, keeping their ratios to a hundredth.
const MaxWeight = 100

func scaleWeights(set []Instance) {
	top := 0
	for _, x := range set {
		top = max(top, x.Weight)
	}
	if top <= MaxWeight {
		return
	}
	for i := range set {
		set[i].Weight = max(1, int(int64(set[i].Weight)*MaxWeight/int64(top)))
	}
}

// validAddr accepts host:port with a port a backend can listen on.
func validAddr(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p > 0 && p <= 65535
}

func equalSets(a, b []Instance) bool {
	return slices.EqualFunc(a, b, func(x, y Instance) bool {
		return x.Addr == y.Addr && x.Weight == y.Weight && maps.Equal(x.Meta, y.Meta)
	})
}

// diff names the addresses set added and removed against prev.
func diff(prev *Set, set []Instance) (added, removed []string) {
	old := map[string]bool{}
	if prev != nil {
		for _, x := range prev.Instances {
			old[x.Addr] = true
		}
	}
	now := map[string]bool{}
	for _, x := range set {
		now[x.Addr] = true
		if !old[x.Addr] {
			added = append(added, x.Addr)
		}
	}
	for a := range old {
		if !now[a] {
			removed = append(removed, a)
		}
	}
	slices.Sort(removed)
	return added, removed
}
