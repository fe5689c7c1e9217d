package limiter

import (
	"fmt"
	"math"
	"time"
)

// Algorithm is how one counter decides.
type Algorithm uint8

const (
	// TokenBucket (the default) refills continuously at the rate and holds
	// at most Burst tokens; it is kept as GCRA, one timestamp per key.
	TokenBucket Algorithm = iota
	// SlidingWindow counts the current and the previous window and weighs
	// the previous one by how much of it still overlaps the sliding window
	// ending now (the two-counter approximation: constant memory per key,
	// no edge burst of a fixed window).
	SlidingWindow
	// FixedWindow counts admissions per window aligned to the Unix epoch,
	// so every node and Redis agree on where windows start.
	FixedWindow
	// LeakyBucket smooths to a constant rate: a request waits for the next
	// free slot (one every Per/Rate) if that is at most MaxDelay away, and
	// is refused otherwise.
	LeakyBucket
)

var algorithmNames = [...]string{"token_bucket", "sliding_window", "fixed_window", "leaky_bucket"}

func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return "unknown"
}

// ParseAlgorithm reads an algorithm as written in configuration; "" is
// the default, TokenBucket.
func ParseAlgorithm(s string) (Algorithm, error) {
	if s == "" {
		return TokenBucket, nil
	}
	for i, n := range algorithmNames {
		if n == s {
			return Algorithm(i), nil
		}
	}
	return 0, fmt.Errorf("algorithm %q: want token_bucket, sliding_window, fixed_window or leaky_bucket", s)
}

// windowed reports the algorithms that count per window.
func (a Algorithm) windowed() bool { return a == SlidingWindow || a == FixedWindow }

// Limit is the compiled settings of one counter, in the units the
// algorithms work in (nanoseconds). It is a small value: the local share of
// a limit (Split) is computed per request without allocating.
type Limit struct {
	Alg Algorithm
	// Interval is the time one admission is worth at the sustained rate
	// (Per / Rate): token and leaky buckets.
	Interval int64
	// Tau is how far the token bucket's theoretical arrival time may run
	// ahead of now: Burst × Interval.
	Tau int64
	// Count is the admissions per Window (window algorithms).
	Count float64
	// Window is the window length (window algorithms).
	Window int64
	// MaxDelay is the longest a leaky bucket holds a request.
	MaxDelay int64
}

// NewLimit compiles rate admissions per per, with burst (token bucket:
// the bucket's capacity, at least 1) and maxDelay (leaky bucket). It
// panics on a non-positive rate or per; Rule validation comes first.
func NewLimit(alg Algorithm, rate float64, per time.Duration, burst float64, maxDelay time.Duration) Limit {
	if !(rate > 0) || per <= 0 {
		panic("limiter: NewLimit needs a positive rate and period")
	}
	l := Limit{Alg: alg, Window: int64(per), Count: rate, MaxDelay: int64(maxDelay)}
	l.Interval = max(1, int64(math.Round(float64(per)/rate)))
	if burst < 1 {
		burst = 1
	}
	l.Tau = int64(math.Round(burst * float64(l.Interval)))
	if l.Tau < l.Interval {
		l.Tau = l.Interval
	}
	return l
}

// Split returns the share of l one of n nodes enforces: the rate divided
// by n. A node's token bucket keeps at least one token of capacity and a
// node's window at least one admission, so a limit smaller than the node
// count still admits (up to n per window in the whole cluster).
func (l Limit) Split(n int) Limit {
	if n <= 1 {
		return l
	}
	s := l
	s.Interval = l.Interval * int64(n)
	// Burst/n tokens of Interval×n each: Tau is unchanged.
	if s.Tau < s.Interval {
		s.Tau = s.Interval
	}
	s.Count = math.Max(1, l.Count/float64(n))
	return s
}

// Scale returns l with its rate multiplied by f (a share of a quota, a
// consumer's own rate over a base), burst scaled alike.
func (l Limit) Scale(f float64) Limit {
	if f == 1 || !(f > 0) {
		return l
	}
	s := l
	s.Interval = max(1, int64(math.Round(float64(l.Interval)/f)))
	// Burst × f tokens of Interval/f each: Tau is unchanged.
	s.Tau = max(s.Interval, l.Tau)
	s.Count = l.Count * f
	return s
}

// Rate reports the admissions per Window this limit sustains.
func (l Limit) Rate() float64 {
	if l.Alg.windowed() {
		return l.Count
	}
	return float64(l.Window) / float64(l.Interval)
}

// Burst reports how many admissions a fresh counter allows at once.
func (l Limit) Burst() float64 {
	switch l.Alg {
	case TokenBucket:
		return float64(l.Tau) / float64(l.Interval)
	case LeakyBucket:
		return float64(l.MaxDelay)/float64(l.Interval) + 1
	}
	return l.Count
}

// State is one key's counter: two words whose meaning depends on the
// algorithm. The zero State is a fresh counter (full bucket, empty
// windows).
//
//	token, leaky: A = theoretical arrival time (unix ns)
//	fixed:        A = window index, B = count
//	sliding:      A = window index, B = current<<32 | previous
type State struct {
	A, B int64
}

// Decision is what Take decided for one request.
type Decision struct {
	OK bool
	// Remaining is how many more requests the counter would admit now.
	Remaining int64
	// Reset is how long until the counter is back to fresh (bucket full,
	// window over), in ns.
	Reset int64
	// RetryAfter, on a refusal, is how long until a request could be
	// admitted if nothing else is admitted meanwhile, in ns.
	RetryAfter int64
	// Delay is how long a leaky bucket holds an admitted request, in ns.
	Delay int64
}

// Take decides one request at now (unix ns) and, when it is admitted,
// records it in s. The caller serializes access to s.
func (l *Limit) Take(s *State, now int64) Decision {
	switch l.Alg {
	case TokenBucket:
		tat := max(s.A, now)
		next := tat + l.Interval
		if next-now > l.Tau {
			return Decision{RetryAfter: next - l.Tau - now, Reset: tat - now}
		}
		s.A = next
		return Decision{OK: true, Remaining: (l.Tau - (next - now)) / l.Interval, Reset: next - now}
	case LeakyBucket:
		slot := max(s.A, now)
		delay := slot - now
		if delay > l.MaxDelay {
			return Decision{RetryAfter: delay - l.MaxDelay, Reset: delay}
		}
		s.A = slot + l.Interval
		return Decision{OK: true, Delay: delay, Remaining: (l.MaxDelay - delay) / l.Interval, Reset: s.A - now}
	case FixedWindow:
		w := now / l.Window
		if s.A != w {
			s.A, s.B = w, 0
		}
		end := (w+1)*l.Window - now
		if float64(s.B+1) > l.Count {
			return Decision{RetryAfter: end, Reset: end}
		}
		s.B++
		return Decision{OK: true, Remaining: max(0, int64(l.Count)-s.B), Reset: end}
	case SlidingWindow:
		w, cur, prev := l.roll(s, now)
		elapsed := now - w*l.Window
		est := float64(prev)*float64(l.Window-elapsed)/float64(l.Window) + float64(cur)
		end := l.Window - elapsed
		if est+1 > l.Count {
			s.A, s.B = w, pack(cur, prev)
			return Decision{RetryAfter: l.slidingWait(cur, prev, elapsed), Reset: end}
		}
		cur++
		s.A, s.B = w, pack(cur, prev)
		return Decision{OK: true, Remaining: max(0, int64(l.Count-est-1)), Reset: end}
	}
	return Decision{}
}

// Give undoes one admission Take recorded at about now (a later rule of
// the same request refused it).
func (l *Limit) Give(s *State, now int64) {
	switch l.Alg {
	case TokenBucket, LeakyBucket:
		s.A -= l.Interval
	case FixedWindow:
		if s.A == now/l.Window && s.B > 0 {
			s.B--
		}
	case SlidingWindow:
		cur, prev := unpack(s.B)
		if s.A == now/l.Window && cur > 0 {
			s.B = pack(cur-1, prev)
		}
	}
}

// Peek reports, without recording anything, how many requests the counter
// would admit now and how long until it is fresh again (ns).
func (l *Limit) Peek(s *State, now int64) (remaining, reset int64) {
	switch l.Alg {
	case TokenBucket:
		tat := max(s.A, now)
		return max(0, (l.Tau-(tat-now))/l.Interval), tat - now
	case LeakyBucket:
		slot := max(s.A, now)
		if slot-now > l.MaxDelay {
			return 0, slot - now
		}
		return (l.MaxDelay-(slot-now))/l.Interval + 1, slot - now
	case FixedWindow:
		w := now / l.Window
		end := (w+1)*l.Window - now
		if s.A != w {
			return int64(l.Count), end
		}
		return max(0, int64(l.Count)-s.B), end
	case SlidingWindow:
		st := *s
		w, cur, prev := l.roll(&st, now)
		elapsed := now - w*l.Window
		est := float64(prev)*float64(l.Window-elapsed)/float64(l.Window) + float64(cur)
		return max(0, int64(l.Count-est)), l.Window - elapsed
	}
	return 0, 0
}

// Idle reports whether s is as good as a fresh counter at now, so that
// forgetting it changes no decision.
func (l *Limit) Idle(s *State, now int64) bool {
	switch l.Alg {
	case TokenBucket, LeakyBucket:
		return s.A <= now
	case FixedWindow:
		return s.B == 0 || s.A < now/l.Window
	case SlidingWindow:
		return s.B == 0 || s.A < now/l.Window-1
	}
	return true
}

// Charge records n admissions made elsewhere (leased tokens spent while
// Redis decided) without refusing any: the counter saturates at empty.
// It keeps a cluster rule's local fallback counter current, so that
// falling back starts from what this node has been admitting rather than
// from a full bucket.
func (l *Limit) Charge(s *State, n int64, now int64) {
	if n <= 0 {
		return
	}
	switch l.Alg {
	case TokenBucket, LeakyBucket:
		tat := max(s.A, now)
		limit := now + l.Tau
		if l.Alg == LeakyBucket {
			limit = now + l.MaxDelay + l.Interval
		}
		if n > (limit-tat)/l.Interval {
			s.A = max(tat, limit)
			return
		}
		s.A = tat + n*l.Interval
	case FixedWindow:
		w := now / l.Window
		if s.A != w {
			s.A, s.B = w, 0
		}
		s.B = min(s.B+n, int64(math.Ceil(l.Count)))
	case SlidingWindow:
		w, cur, prev := l.roll(s, now)
		cur = min(cur+n, int64(math.Ceil(l.Count)), math.MaxUint32)
		s.A, s.B = w, pack(cur, prev)
	}
}

// Used reports how much of the counter is in use at now, in admissions:
// what a fresh counter would have to be charged to equal s.
func (l *Limit) Used(s *State, now int64) int64 {
	switch l.Alg {
	case TokenBucket, LeakyBucket:
		if s.A <= now {
			return 0
		}
		return (s.A - now + l.Interval - 1) / l.Interval
	case FixedWindow:
		if s.A != now/l.Window {
			return 0
		}
		return s.B
	case SlidingWindow:
		st := *s
		w, cur, prev := l.roll(&st, now)
		elapsed := now - w*l.Window
		return int64(math.Ceil(float64(prev)*float64(l.Window-elapsed)/float64(l.Window))) + cur
	}
	return 0
}

// roll moves a sliding window's counts to now's window: it returns the
// window index and the current and previous counts as of now.
func (l *Limit) roll(s *State, now int64) (w, cur, prev int64) {
	w = now / l.Window
	cur, prev = unpack(s.B)
	switch s.A {
	case w:
	case w - 1:
		prev, cur = cur, 0
	default:
		prev, cur = 0, 0
	}
	return w, cur, prev
}

// slidingWait is how long until est+1 <= Count with no more admissions,
// elapsed into the current window.
func (l *Limit) slidingWait(cur, prev, elapsed int64) int64 {
	W := float64(l.Window)
	room := l.Count - 1 - float64(cur)
	if room >= 0 && prev > 0 {
		// prev × (W - e)/W <= room  ⇔  e >= W × (1 - room/prev)
		e := W * (1 - room/float64(prev))
		if wait := int64(math.Ceil(e)) - elapsed; wait > 0 {
			return wait
		}
		return 1
	}
	// Only the next window can make room: cur becomes the previous count.
	toNext := l.Window - elapsed
	room = l.Count - 1
	if cur == 0 || float64(cur) <= room {
		return toNext
	}
	e := W * (1 - room/float64(cur))
	return toNext + int64(math.Ceil(e))
}

func pack(cur, prev int64) int64 {
	return int64(uint64(min(cur, math.MaxUint32))<<32 | uint64(min(prev, math.MaxUint32)))
}

func unpack(b int64) (cur, prev int64) {
	return int64(uint64(b) >> 32), int64(uint64(b) & math.MaxUint32)
}
