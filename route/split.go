package route

import (
	"fmt"
	"math/rand/v2"

	"github.com/cespare/xxhash/v2"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
)

// Split sends a route's traffic to several actions (usually services of
// different versions) by percentage. With a key the choice is sticky:
// xxhash(value) mod 100 picks the share, the same on every node and after
// every reload, so one user always sees the same version. Requests without
// the key are spread by the same percentages at random. A force header or
// cookie naming one of the targets overrides both.
type Split struct {
	targets []SplitTarget
	// bounds[i] is the cumulative share, in hundredths of a percent, that
	// ends target i.
	bounds []int
	key    *source.Source
	force  []source.Source
}

// SplitTarget is one share.
type SplitTarget struct {
	Name    string // what a force value must equal (the service name)
	Percent float64
	Action  pipeline.Action
}

// NewSplit checks that shares add up to 100 and builds the split.
func NewSplit(targets []SplitTarget, key *source.Source, force []source.Source) (*Split, error) {
	if len(targets) < 2 {
		return nil, fmt.Errorf("split needs at least two targets")
	}
	s := &Split{targets: targets, key: key, force: force}
	total := 0
	for _, t := range targets {
		if t.Percent < 0 || t.Percent > 100 {
			return nil, fmt.Errorf("split: %s percent %v is outside 0..100", t.Name, t.Percent)
		}
		total += int(t.Percent*100 + 0.5)
		s.bounds = append(s.bounds, total)
	}
	if total != 10000 {
		return nil, fmt.Errorf("split percentages add up to %.2f, want 100", float64(total)/100)
	}
	return s, nil
}

// NewSplitWeights builds an unkeyed split whose targets' Percent fields are
// relative weights (any positive numbers), as for weighted fallbacks.
func NewSplitWeights(targets []SplitTarget) (*Split, error) {
	total := 0.0
	for _, t := range targets {
		if t.Percent <= 0 {
			return nil, fmt.Errorf("split: %s weight must be positive", t.Name)
		}
		total += t.Percent
	}
	s := &Split{targets: targets}
	acc := 0.0
	for _, t := range targets {
		acc += t.Percent
		s.bounds = append(s.bounds, int(acc/total*10000+0.5))
	}
	s.bounds[len(s.bounds)-1] = 10000
	return s, nil
}

// Bucket maps a key value to 0..9999 (hundredths of a percent); exported so
// tests and tools can predict where a user lands.
func Bucket(v []byte) int { return int(xxhash.Sum64(v) % 10000) }

// Handle implements pipeline.Filter: it takes the decision on the request
// as the client sent it, before the forwarding step rewrites headers (it
// drops a client's X-User-Id, a common split key), and leaves it in
// the request's splitChoice for Serve.
func (s *Split) Handle(c *pipeline.Ctx) pipeline.Verdict {
	splitChoice.Set(c, s.pick(c)+1)
	return pipeline.Continue
}

// splitChoice is the target a split's filter step picked (1-based), 0
// when none was made.
var splitChoice = pipeline.NewSlot[int]()

// Serve implements pipeline.Action, with the choice Handle made (or a new
// one when the split runs without its filter step).
func (s *Split) Serve(c *pipeline.Ctx) {
	i := splitChoice.Get(c) - 1
	if i < 0 || i >= len(s.targets) {
		i = s.pick(c)
	}
	s.targets[i].Action.Serve(c)
}

func (s *Split) pick(c *pipeline.Ctx) int {
	r := source.NewReader(c)
	for i := range s.force {
		if v, _ := r.Value(&s.force[i]); len(v) > 0 {
			for i := range s.targets {
				if string(v) == s.targets[i].Name {
					return i
				}
			}
		}
	}
	var b int
	if v := s.keyValue(c); v != nil {
		b = Bucket(v)
	} else {
		b = rand.IntN(10000)
	}
	for i, end := range s.bounds {
		if b < end {
			return i
		}
	}
	return len(s.targets) - 1
}

func (s *Split) keyValue(c *pipeline.Ctx) []byte {
	if s.key == nil {
		return nil
	}
	r := source.NewReader(c)
	if v, found := r.Value(s.key); found == source.Scalar && len(v) > 0 {
		return v
	}
	return nil
}
