package upstream

import (
	"sync/atomic"
	"time"
)

// How long an idle connection is kept when idle_conn is not set: up to
// autoIdleConn, below what the backend announces or is seen to keep
// (idleLearner), in the event loops' pools and in fasthttp's client
// (guardedConn).
const autoIdleConn = 60 * time.Second

// A connection the backend closes after being idle for d is kept idle for
// keepBelow(d): a request sent on it later could cross the backend's close
// and fail (only an idempotent one is sent again). The margin covers the
// backend's timer starting before the pool's, and a timeout announced in
// whole seconds.
const minIdleMargin = 250 * time.Millisecond

func keepBelow(d time.Duration) time.Duration {
	return max(d-max(d/10, minIdleMargin), 0)
}

// An idle close is learned only when the connection had been idle at
// least learnFloor: a backend that restarts closes every connection at
// once, some of them idle for a moment only. What is learned lapses after
// learnedFor without another such close (the backend's timeout may have
// been raised); until then each close seen renews it.
const (
	learnFloor = time.Second
	learnedFor = 10 * time.Minute
)

// idleLearner is what an instance has seen of how long its backend keeps
// an idle connection: the idle time of the last kept connection it closed,
// shared by the pools of every loop. A backend that does not say its
// timeout (uvicorn, gunicorn, Tomcat) is seen closing connections at it;
// after the first such close the pools keep connections a little less.
//
// Two closes noted at once may leave one's limit with the other's lapse
// time: both are from the same moment and backend, so no lock orders them.
type idleLearner struct {
	limit atomic.Int64 // keepBelow of the last close seen, in ns; 0 for none
	until atomic.Int64 // when it lapses, Unix ns
}

// closed notes that the backend closed a connection idle for idleFor; a
// pool keeping connections up to ceiling learns nothing from a close at
// or past it.
func (l *idleLearner) closed(idleFor, ceiling time.Duration, now time.Time) {
	if idleFor < learnFloor {
		return
	}
	if idleFor >= ceiling {
		l.limit.Store(0)
		return
	}
	l.learn(keepBelow(idleFor), now)
}

// foundClosed notes a connection found closed by the backend when it was
// next taken, idle for idleFor: the close came at most that long after
// its last answer, perhaps much sooner. Such an upper bound only ever
// shortens what is learned while it holds; each renews it.
func (l *idleLearner) foundClosed(idleFor, ceiling time.Duration, now time.Time) {
	if idleFor < learnFloor || idleFor >= ceiling {
		return
	}
	d := keepBelow(idleFor)
	if cur := l.get(now); cur > 0 && cur < d {
		d = cur
	}
	l.learn(d, now)
}

// learn holds d as the limit for learnedFor from now.
func (l *idleLearner) learn(d time.Duration, now time.Time) {
	l.limit.Store(int64(d))
	l.until.Store(now.Add(learnedFor).UnixNano())
}

// get is the learned limit at now, 0 for none.
func (l *idleLearner) get(now time.Time) time.Duration {
	d := l.limit.Load()
	if d == 0 || now.UnixNano() > l.until.Load() {
		return 0
	}
	return time.Duration(d)
}
