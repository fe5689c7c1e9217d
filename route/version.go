package route

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Deprecation is a response filter that marks every answer of a deprecated
// API version (RFC 9745 Deprecation, RFC 8594 Sunset, a successor Link and
// X-API-Deprecated), whoever made the answer: upstream or gateway.
type Deprecation struct {
	headers [][2][]byte
}

// NewDeprecation builds the headers once. since and sunset are dates
// (YYYY-MM-DD) or empty; successor is a path or URL or empty.
func NewDeprecation(since, sunset, successor string) (*Deprecation, error) {
	d := &Deprecation{}
	dep := "true"
	if since != "" {
		t, err := time.Parse(time.DateOnly, since)
		if err != nil {
			return nil, fmt.Errorf("deprecated.since %q: want YYYY-MM-DD", since)
		}
		dep = "@" + strconv.FormatInt(t.Unix(), 10)
	}
	d.add("Deprecation", dep)
	d.add("X-API-Deprecated", "true")
	if sunset != "" {
		t, err := time.Parse(time.DateOnly, sunset)
		if err != nil {
			return nil, fmt.Errorf("deprecated.sunset %q: want YYYY-MM-DD", sunset)
		}
		d.add("Sunset", t.UTC().Format(http.TimeFormat))
	}
	if successor != "" {
		d.add("Link", "<"+successor+`>; rel="successor-version"`)
	}
	return d, nil
}

func (d *Deprecation) add(k, v string) {
	d.headers = append(d.headers, [2][]byte{[]byte(k), []byte(v)})
}

// Handle implements pipeline.Filter.
func (d *Deprecation) Handle(*pipeline.Ctx) pipeline.Verdict { return pipeline.Continue }

// HandleResponse implements pipeline.ResponseFilter.
func (d *Deprecation) HandleResponse(c *pipeline.Ctx) {
	for _, h := range d.headers {
		c.Resp.Header.SetBytesKV(h[0], h[1])
	}
}

// Offline is the action of a retired API version: a 308 to the same
// resource under the successor prefix, or a fixed answer.
type Offline struct {
	from      []byte // the route's prefix, replaced in the redirect
	successor []byte
	answer    *pipeline.Static
}

// NewOffline builds an offline action. from is the route's path prefix
// ("" for exact or regex routes, whose redirect goes to successor as is).
func NewOffline(from, successor string, answer *pipeline.Static) (*Offline, error) {
	if (successor == "") == (answer == nil) {
		return nil, fmt.Errorf("offline needs exactly one of successor or answer")
	}
	return &Offline{from: []byte(from), successor: []byte(successor), answer: answer}, nil
}

var (
	strLocation = []byte("Location")
	strQMark    = []byte("?")
)

// Serve implements pipeline.Action.
func (o *Offline) Serve(c *pipeline.Ctx) {
	if o.answer != nil {
		o.answer.WriteTo(c)
		c.Decision = "version offline"
		return
	}
	// The canonical path and the query as received: the Location is
	// built from encoded bytes, never from a decoded path.
	path := c.Target.Path
	b := append(c.Scratch[:0], o.successor...)
	if len(o.from) > 0 && bytes.HasPrefix(path, o.from) {
		b = append(b, path[len(o.from):]...)
	}
	if q := c.Target.Query; len(q) > 0 {
		b = append(b, strQMark...)
		b = append(b, q...)
	}
	c.Scratch = b
	c.Resp.Reset()
	c.Resp.SetStatusCode(http.StatusPermanentRedirect)
	c.Resp.Header.SetBytesKV(strLocation, b)
	c.Decision = "version offline"
}
