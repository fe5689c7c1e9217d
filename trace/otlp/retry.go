package otlp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Sender delivers one encoded export request. An error that the backend
// may accept on a later try is a *RetryableError.
type Sender interface {
	Send(ctx context.Context, body []byte) error
}

// RetryableError is a failure the OTLP specification says to try again:
// a transport error, HTTP 429/502/503/504, gRPC UNAVAILABLE and its kin.
// After is the wait the backend asked for (Retry-After, RetryInfo), 0
// when it named none.
type RetryableError struct {
	Err   error
	After time.Duration
}

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// Backoff is the wait between tries of one batch: exponential from
// Initial up to Max, each wait drawn within ±50 % of its value, until
// MaxElapsed has passed since the first try. A wait the backend asked for
// replaces the drawn one, within the same bound.
type Backoff struct {
	Initial    time.Duration // default 1s
	Max        time.Duration // default 30s
	MaxElapsed time.Duration // default 1m
	// Timeout bounds each try (default 10s).
	Timeout time.Duration
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = time.Second
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.MaxElapsed <= 0 {
		b.MaxElapsed = time.Minute
	}
	if b.Timeout <= 0 {
		b.Timeout = 10 * time.Second
	}
	return b
}

// deliver sends body, trying again by the backoff while the failure is
// retryable and the time allows; Close cuts the waits short.
func (e *Exporter) deliver(body []byte) error {
	b := e.cfg.Retry
	giveUp := time.Now().Add(b.MaxElapsed)
	interval := b.Initial
	for {
		ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
		err := e.cfg.Send.Send(ctx, body)
		cancel()
		if err == nil {
			return nil
		}
		var re *RetryableError
		if !errors.As(err, &re) {
			return err
		}
		wait := jitter(interval)
		if re.After > 0 {
			wait = re.After
		}
		if time.Now().Add(wait).After(giveUp) {
			return fmt.Errorf("%w (gave up retrying after %s)", err, b.MaxElapsed)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-e.stop.Done():
			t.Stop()
			return fmt.Errorf("%w (stopping)", err)
		}
		e.retries.Add(1)
		interval = min(interval*2, b.Max)
	}
}

// jitter draws a wait within ±50 % of d, so that gateways that lost
// their backend together do not come back at the same instant.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d+1)
}
