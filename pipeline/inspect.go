package pipeline

// Inspector is a part of a snapshot (a route's filter, a global one, or a
// shared object) that has something to show operators: the admin API and
// the process's status find what to list by this interface, knowing no
// feature's type. Inspect is called at the admin API's pace, never on the
// request path.
type Inspector interface {
	// Inspect shows the part's state, ready for JSON, once for each thing
	// it holds (a limits filter shows each of its rules), under the kind
	// of list it belongs in: "record", "mirror", "recording", "breaker",
	// "degrade", "waf", "limits".
	Inspect(show func(kind string, state any))
}

// Switcher is a part operators turn on and off at run time (a route's
// recording, its degraded answer).
type Switcher interface {
	// Switch sets the part on or off and reports what it was.
	Switch(on bool) (was bool)
}
