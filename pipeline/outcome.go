package pipeline

import "time"

// Result says how a request's upstream exchange ended. Breakers, instance
// health, metrics and the access log read it; nothing parses messages.
type Result uint8

const (
	ResultNone       Result = iota // no upstream exchange (a gateway answer, a mock)
	ResultOK                       // the upstream answered; Outcome.Status is its status
	ResultTimeout                  // connect or read deadline passed
	ResultRefused                  // nothing reached the backend (connection refused)
	ResultReset                    // the connection broke mid-exchange
	ResultBusy                     // the instance's connection limit was reached
	ResultTooLarge                 // the upstream's answer passed the size limit
	ResultClientBody               // the client's streamed body broke a limit or its framing
	ResultNoInstance               // no instance was available to try
	ResultOpen                     // a circuit breaker was open: nothing was sent
)

var resultNames = [...]string{"", "ok", "timeout", "refused", "reset", "busy", "too_large", "client_body", "no_instance", "breaker_open"}

// String names the result for logs and metrics labels.
func (r Result) String() string { return resultNames[r] }

// UpstreamFailure reports whether the result counts against the upstream
// (breakers, ejection): it failed to answer in time or at all, or could
// not take the request. A client's own fault and a size limit do not.
func (r Result) UpstreamFailure() bool {
	return r == ResultTimeout || r == ResultRefused || r == ResultReset || r == ResultBusy || r == ResultNoInstance
}

// Outcome is what the upstream exchange of one request did.
type Outcome struct {
	Result Result
	// Service names the service the request went to ("" when none was
	// chosen); it points into the config snapshot.
	Service string
	// Status is the upstream's status code when Result is ResultOK.
	Status int
	// Instance is the address of the instance tried last.
	Instance string
	// Attempts counts tries (1 normally, 2 after a retry).
	Attempts int
	// Latency is how long the exchange took, retry included.
	Latency time.Duration
}

// Counted reports whether the outcome says anything about the upstream's
// health: it answered, or failed to. A request that never went (a breaker
// was open, the client's body broke a limit) counts for nothing.
func (o *Outcome) Counted() bool {
	return o.Result == ResultOK || o.Result.UpstreamFailure()
}
