package pipeline

// Verdict is a filter's decision: go on to the next filter, or stop here
// because the filter has written the answer itself.
type Verdict uint8

const (
	Continue Verdict = iota
	Stop
)

// Filter inspects or changes a request before the route's action runs.
// Filters are built once per config snapshot and shared by all requests, so
// Handle must be safe for concurrent use and must not keep c after returning.
type Filter interface {
	Handle(c *Ctx) Verdict
}

// ResponseFilter is implemented by filters that also want to see the answer.
// HandleResponse runs after the action, in reverse order, for every filter
// whose Handle ran (including one that stopped the chain).
type ResponseFilter interface {
	HandleResponse(c *Ctx)
}

// Action is the terminal step of a chain: proxy upstream, mock, or degrade.
type Action interface {
	Serve(c *Ctx)
}

// ActionFunc adapts a function to Action.
type ActionFunc func(c *Ctx)

func (f ActionFunc) Serve(c *Ctx) { f(c) }

// Chain is a route's flat list of filters and its action, built at config
// load and immutable afterwards.
type Chain struct {
	filters []Filter
	// after[i] is filters[i] as a ResponseFilter, or nil; resolved once here
	// so Run does no type assertions per request.
	after  []ResponseFilter
	action Action
	// answered says a filter sees the answer (a ResponseFilter): the
	// answer is then built in the fasthttp.Response, never held as read.
	answered bool
}

// NewChain builds a chain that runs filters in order and then action.
func NewChain(action Action, filters ...Filter) *Chain {
	ch := &Chain{filters: filters, after: make([]ResponseFilter, len(filters)), action: action}
	for i, f := range filters {
		if rf, ok := f.(ResponseFilter); ok {
			ch.after[i] = rf
			ch.answered = true
		}
	}
	return ch
}

// Filters returns the chain's filters in order (for reports: admin, metrics).
func (ch *Chain) Filters() []Filter { return ch.filters }

// PassesAnswer reports that no filter of the chain sees the answer, so
// an upstream's may be written as read (Ctx.Answer).
func (ch *Chain) PassesAnswer() bool { return !ch.answered }

// Len reports the number of filters.
func (ch *Chain) Len() int { return len(ch.filters) }

// Run passes c through the filters, the action unless a filter stopped, and
// then the response filters of the filters that ran, in reverse order.
func (ch *Chain) Run(c *Ctx) {
	ran := 0
	stopped := false
	for _, f := range ch.filters {
		ran++
		if f.Handle(c) == Stop {
			stopped = true
			break
		}
	}
	if !stopped && ch.action != nil {
		ch.action.Serve(c)
	}
	for i := ran - 1; i >= 0; i-- {
		if rf := ch.after[i]; rf != nil {
			rf.HandleResponse(c)
		}
	}
}
