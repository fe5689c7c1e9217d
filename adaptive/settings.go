package adaptive

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Settings is a service's or a route's `concurrency` setting:
//
//	concurrency: {limit: adaptive, min: 4, max: 1000, max_wait: 2ms, status: 503, retry_after: 1}
//	concurrency: {limit: 64}
type Settings struct {
	// Limit is "adaptive" (the default) or a fixed number of requests in
	// flight on this node.
	Limit string `yaml:"limit"`
	// Min and Max bound an adaptive limit; Min is also the concurrency
	// the no-load latency is probed at.
	Min int `yaml:"min"`
	Max int `yaml:"max"`
	// MaxWait is the longest a request over the limit waits for a slot.
	MaxWait pipeline.Duration `yaml:"max_wait"`
	// Status and RetryAfter (seconds, sent as Retry-After) make the
	// refusal.
	Status     int `yaml:"status"`
	RetryAfter int `yaml:"retry_after"`

	fixed int // Limit as a number; 0 for adaptive
}

// Defaults of the setting.
const (
	defaultMin     = 4
	defaultMax     = 1000
	defaultMaxWait = 2 * time.Millisecond
	defaultStatus  = 503
	defaultRetry   = 1
	// maxMaxWait keeps parked requests from holding connections long:
	// a wait is meant to bridge a completion, not to queue.
	maxMaxWait = time.Second
)

func (s *Settings) adaptive() bool { return s.fixed == 0 }

// Check validates s and writes its defaults in.
func (s *Settings) Check() error {
	switch s.Limit {
	case "", "adaptive":
		s.Limit = "adaptive"
		s.fixed = 0
	default:
		n, err := strconv.Atoi(s.Limit)
		if err != nil || n < 1 || n > 1_000_000 {
			return fmt.Errorf("concurrency.limit must be adaptive or a number from 1 to 1000000, got %q", s.Limit)
		}
		s.fixed = n
	}
	if s.Min == 0 {
		s.Min = defaultMin
	}
	if s.Max == 0 {
		s.Max = max(defaultMax, s.Min)
	}
	if s.MaxWait == 0 {
		s.MaxWait = pipeline.Duration(defaultMaxWait)
	}
	if s.Status == 0 {
		s.Status = defaultStatus
	}
	switch {
	case s.Min < 1 || s.Max < s.Min || s.Max > 1_000_000:
		return errors.New("concurrency: want 1 <= min <= max <= 1000000")
	case s.MaxWait.D() > maxMaxWait:
		return fmt.Errorf("concurrency.max_wait must be at most %s", maxMaxWait)
	case s.Status < 400 || s.Status > 599:
		return fmt.Errorf("concurrency.status must be a 4xx or 5xx status, got %d", s.Status)
	case s.RetryAfter < 0 || s.RetryAfter > 3600:
		return errors.New("concurrency.retry_after must be 1 to 3600 seconds")
	}
	if s.RetryAfter == 0 {
		s.RetryAfter = defaultRetry
	}
	return nil
}

// digest identifies the settings, so that a reload that keeps them keeps
// the gate and what it learned.
func (s *Settings) digest() string { return pipeline.Digest(*s) }
