package history

import (
	"sort"
	"sync"
	"time"
)

// DefaultKeep is how many hours a Local store keeps: a week.
const DefaultKeep = 7 * 24

// RouteHour is one route's traffic in one hour.
type RouteHour struct {
	Requests uint64 `json:"requests"`
	// PeakMinute is the most requests the route took in one minute of the
	// hour, and PeakAt when that minute began.
	PeakMinute uint64    `json:"peak_minute"`
	PeakAt     time.Time `json:"peak_at"`
}

// Hour is every route's traffic in the hour that begins at Start.
type Hour struct {
	Start  time.Time            `json:"start"`
	Routes map[string]RouteHour `json:"routes"`
}

// add counts a minute's requests of a route in h.
func (h *Hour) add(route string, minute time.Time, n uint64) {
	r := h.Routes[route]
	r.Requests += n
	if n > r.PeakMinute {
		r.PeakMinute, r.PeakAt = n, minute
	}
	h.Routes[route] = r
}

// Local keeps the last hours of this node's traffic in memory.
type Local struct {
	keep  int
	mu    sync.Mutex
	hours []Hour // oldest first
}

// NewLocal returns a store that keeps the last keep hours (DefaultKeep
// when keep <= 0).
func NewLocal(keep int) *Local {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Local{keep: keep}
}

// AddMinute counts the requests each route took in the minute that began
// at minute.
func (l *Local) AddMinute(minute time.Time, counts map[string]uint64) {
	minute = minute.UTC().Truncate(time.Minute)
	start := minute.Truncate(time.Hour)
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.hours); n == 0 || l.hours[n-1].Start.Before(start) {
		l.hours = append(l.hours, Hour{Start: start, Routes: map[string]RouteHour{}})
		if len(l.hours) > l.keep {
			l.hours = append(l.hours[:0], l.hours[len(l.hours)-l.keep:]...)
		}
	}
	h := &l.hours[len(l.hours)-1]
	if h.Start.After(start) {
		return // a minute from before the last hour (the clock went back): dropped
	}
	for route, n := range counts {
		if n > 0 {
			h.add(route, minute, n)
		}
	}
}

// Hours returns copies of the hours that began at or after since, oldest
// first.
func (l *Local) Hours(since time.Time) []Hour {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.hours), func(i int) bool { return !l.hours[i].Start.Before(since) })
	out := make([]Hour, 0, len(l.hours)-i)
	for _, h := range l.hours[i:] {
		c := Hour{Start: h.Start, Routes: make(map[string]RouteHour, len(h.Routes))}
		for k, v := range h.Routes {
			c.Routes[k] = v
		}
		out = append(out, c)
	}
	return out
}
