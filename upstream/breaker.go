package upstream

import (
	"time"

	"github.com/tollgate/tollgate/breaker"
	"github.com/tollgate/tollgate/pipeline"
)

// BreakerSettings is a service's `breaker` setting: package breaker's,
// run by the service around its exchanges.
type BreakerSettings = breaker.Settings

// SetBreaker gives the service its breaker for s, kept across reloads in
// st while s is unchanged (breaker.ForService).
func (c *ServiceConfig) SetBreaker(st *pipeline.StateBuild, s *BreakerSettings, now func() time.Time) error {
	br, err := breaker.ForService(st, c.Name, s, now)
	if err != nil {
		return err
	}
	c.Breaker, c.FailureStatus = br, s.FailureStatus
	return nil
}
