// Package adaptive protects backends whose capacity nobody wrote down: a
// concurrency limit per service (and per route where one is set) that
// follows the backend's measured latency, and a gate that lets at most
// that many requests be in flight on this node, parks a few more on their
// event loop for a bounded wait, and refuses the rest fast.
//
// # Estimator: Vegas over sample windows
//
// The limit follows TCP Vegas as Netflix's concurrency-limits library
// applies it to request concurrency. From an estimate of the backend's
// no-load latency (rtt₀) and the latency it shows now (rtt), the queue the
// limit L builds in the backend is
//
//	queue = L · (1 − rtt₀/rtt)
//
// Below α = 3·log₁₀L queued requests the limit grows (by 6·log₁₀L while the
// queue is under log₁₀L, else by log₁₀L); above β = 6·log₁₀L it shrinks by
// log₁₀L; in between it holds. A window in which the backend failed to
// answer (timeouts, resets, refusals) cuts the limit by a tenth. The limit
// stays within min and max, and it does not grow while the traffic never
// used half of it (the latency of an idle backend says nothing about its
// capacity).
//
// Vegas rather than Gradient2: Gradient2 compares a short latency average
// with a long one, and a backend that stays congested drags the long one up
// after it, so the limit creeps up with the queue it should drain. Vegas
// compares with the no-load latency, which congestion does not move; the
// queue it keeps is a few requests, whatever the backend's speed. Its
// weakness is the estimate of rtt₀, handled below.
//
// # Noisy latency
//
// No decision is taken on one request: completions are gathered in
// windows of windowSamples requests, and the window's mean latency is the
// rtt compared; a jittery backend moves a mean of twenty far less than any
// one sample. rtt₀ is never a single fast sample either: it is a window
// mean too, taken while the backend carried little.
//
// # Re-probing the no-load latency
//
// A minimum kept forever sticks at an old low: after a deploy that makes
// every request slower, the old rtt₀ would read as a standing queue and
// squeeze the limit to min. So the estimate is re-measured every
// probeEvery (jittered by a quarter, so that nodes do not probe together):
// the gate drops its limit to min until the requests admitted before have
// finished, and the mean of the next window, measured at that low
// concurrency, is the new rtt₀. Between probes a window whose mean is
// lower than rtt₀ lowers it at once (the backend got faster). A probe that
// gets no window within probeTimeout gives up and keeps the old estimate.
// A probe costs a fraction of a second at min concurrency every few
// seconds; it is also how the gate starts, so the first rtt₀ is measured
// before any queue can inflate it.
//
// # Request path
//
// Admission is a compare-and-swap on the in-flight count against the
// limit; a completion adds its latency to the window with one atomic add
// (count and sum packed in one word), and the completion that fills the
// window recomputes the limit, alone (a flag taken by compare-and-swap).
// Nothing is locked or allocated per request. The in-flight count is this
// node's: each node learns the backend's share it gets.
//
// Requests over the limit park on their own event loop, in a first-in,
// first-out line per loop, for at most max_wait; a completion on that loop
// hands its slot to the first in line. A wait that times out tries once
// more (a slot may have freed on another loop) and is then refused with
// the configured status and Retry-After, as the decision "concurrency
// limit reached".
//
// # Load shedding
//
// The gate protects a backend; shedding (shed.go) protects the gateway
// itself. Routes carry an importance (low, normal, critical); with the
// top-level overload section set, a request whose event loop lags past
// its importance's threshold (pipeline.LoopLoad: the loop's smoothed
// batch length, or how long the running batch has run, whichever is
// longer) is refused before anything else of its route runs. Refusing
// costs the loop little, so shedding the least important requests is what
// lets it catch up on the rest.
package adaptive
