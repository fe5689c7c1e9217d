package waf

import "github.com/tollgate/tollgate/pipeline"

// Inspect implements pipeline.Inspector: the route's detections, sqli and
// xss found, how many requests were blocked (the rest were logged), and
// the bodies it could not read whole, in all and by reason.
func (w *WAF) Inspect(show func(kind string, state any)) {
	c := w.counts
	m := map[string]uint64{"sqli": c.SQLi.Load(), "xss": c.XSS.Load(), "blocked": c.Blocked.Load(), "uninspected": c.Hidden.Load()}
	for i, reason := range ReasonNames {
		m["uninspected_"+reason] = c.Unread[i].Load()
	}
	show("waf", m)
}

var _ pipeline.Inspector = (*WAF)(nil)
