package route

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Mock is the action of a route that answers by itself with one of several
// fixed responses. A delay sleeps the request's own goroutine; transports
// never run handlers on a reactor thread, so other connections go on.
type Mock struct {
	answers []MockAnswer
	pick    string
	next    atomic.Uint64
}

// MockAnswer is one canned response and how long to wait before it.
type MockAnswer struct {
	Answer *pipeline.Static
	Delay  time.Duration
}

// NewMock builds a mock; pick is first (default), random or round_robin.
func NewMock(pick string, answers []MockAnswer) (*Mock, error) {
	if len(answers) == 0 {
		return nil, fmt.Errorf("mock needs at least one response")
	}
	switch pick {
	case "":
		pick = "first"
	case "first", "random", "round_robin":
	default:
		return nil, fmt.Errorf("mock.pick %q: want first, random or round_robin", pick)
	}
	return &Mock{answers: answers, pick: pick}, nil
}

// Serve implements pipeline.Action.
func (m *Mock) Serve(c *pipeline.Ctx) {
	i := 0
	switch m.pick {
	case "random":
		i = rand.IntN(len(m.answers))
	case "round_robin":
		i = int((m.next.Add(1) - 1) % uint64(len(m.answers)))
	}
	a := &m.answers[i]
	c.Sleep(a.Delay)
	a.Answer.WriteTo(c)
	c.Decision = "mock"
}
