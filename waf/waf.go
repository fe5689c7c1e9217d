// Package waf is the gateway's WAF-lite: per route, it looks for SQL
// injection and cross-site scripting in every value a client can hand a
// backend as data (path segments, query, form and multipart parameters
// and their names, JSON keys and strings, cookies, chosen headers, text
// bodies) with libinjection's detectors and the rules in rules.go, and
// logs or blocks what it finds. A body it cannot read whole is refused at
// block, as OWASP CRS refuses one: an unread body is a side door.
// Allow-lists by parameter, or by parameter and value, keep legitimate
// inputs (a product called "select", a rich-text field) from being refused.
package waf

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/corazawaf/libinjection-go"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
)

// Level says what a detection does.
type Level uint8

const (
	Off   Level = iota // nothing is checked
	Log                // the request goes on; the access log's decision and a counter say what was found
	Block              // 403
)

// Config is a route's `waf` setting.
//
//	waf: {level: block, allow: [query.keyword, json.article.body, "query.sort=select"], checks: [sqli, xss]}
type Config struct {
	Level string `yaml:"level"` // off | log | block (default block)
	// Allow lists parameters never checked ("query.q", "form.comment",
	// "json.article.body", "path") or one value a parameter may have
	// ("query.sort=select", "*=select" for any parameter).
	Allow []string `yaml:"allow"`
	// Checks are the detectors to run: sqli, xss (default both).
	Checks []string `yaml:"checks"`
	// Headers are the request fields checked besides the cookies (default
	// User-Agent and Referer; [] checks none).
	Headers *[]string `yaml:"headers"`
	// OtherBodies is what happens to a body that is not JSON, an urlencoded
	// or a multipart form: inspect (default: a text body — text/*, XML, or
	// no Content-Type — is checked whole as one value, others pass), refuse
	// (415 at block: the route takes only the three), or pass.
	OtherBodies string `yaml:"other_bodies"`
}

// defaultHeaders are the fields checked when the setting names none:
// the two a backend most often logs or shows back.
var defaultHeaders = []string{"User-Agent", "Referer"}

// otherBodies values.
const (
	inspectOther uint8 = iota
	refuseOther
	passOther
)

// WAF is a compiled route setting; it is a pipeline.Filter, safe for
// concurrent use, and allocation-free per request.
type WAF struct {
	level    Level
	sqli     bool
	xss      bool
	skip     map[string]bool // "query.q": never checked
	allowVal map[string]bool // "query.sort=select", "*=select"
	maxValue int             // the longest allowed value
	headers  []string        // lower case
	other    uint8           // inspectOther, refuseOther, passOther
	counts   *Counts
}

// Counts are a route's detections, kept across reloads. Hidden counts
// bodies the WAF could not read whole, Unread the same by reason.
type Counts struct {
	SQLi, XSS, Hidden, Blocked atomic.Uint64
	Unread                     [numReasons]atomic.Uint64
}

// reason is why a body was not read whole.
type reason uint8

const (
	tooLarge            reason = iota // streamed: above stream_body_bytes
	unknownEncoding                   // Content-Encoding, a charset but UTF-8, a part's transfer encoding
	unreadableJSON                    // not one valid JSON document
	tooDeep                           // JSON nested deeper than 1024
	unreadableMultipart               // multipart/form-data that does not read strictly
	unknownMediaType                  // no reader, and other_bodies: refuse
	numReasons
	readWhole = numReasons
)

// ReasonNames label the Unread counts in /metrics.
var ReasonNames = [numReasons]string{"too_large", "unknown_encoding", "unreadable_json", "too_deep", "unreadable_multipart", "unknown_media_type"}

// refusals are the answers at block, by reason: 413 when the body is too
// large to hold, 415 when it is encoded or typed in a way the WAF has no
// reader for (the client can send it plainly), 400 when it does not parse
// (as CRS answers a request body error).
var refusals = [numReasons]*pipeline.Canned{
	pipeline.NewCanned(413, "request body too large for the WAF to inspect"),
	pipeline.NewCanned(415, "request body encoded in a way the WAF does not read (Content-Encoding, charset or transfer encoding)"),
	pipeline.NewCanned(400, "request body is not valid JSON; the WAF cannot inspect it"),
	pipeline.NewCanned(400, "request body nests JSON deeper than 1024 levels; the WAF cannot inspect it"),
	pipeline.NewCanned(400, "request body is not well-formed multipart/form-data; the WAF cannot inspect it"),
	pipeline.NewCanned(415, "request body media type not accepted here: send JSON, an urlencoded or a multipart form"),
}

var (
	blockSQLi = pipeline.NewCanned(403, "request blocked by WAF rule sqli")
	blockXSS  = pipeline.NewCanned(403, "request blocked by WAF rule xss")
)

// Decisions the access log shows for a detection at level log.
const (
	logSQLi = "waf sqli (logged)"
	logXSS  = "waf xss (logged)"
)

var logHidden = func() (d [numReasons]string) {
	for i, n := range ReasonNames {
		d[i] = "waf: body not inspected, " + n + " (logged)"
	}
	return d
}()

// New compiles a setting; counts may be nil (a fresh set is made).
func New(cfg Config, counts *Counts) (*WAF, error) {
	w := &WAF{skip: map[string]bool{}, allowVal: map[string]bool{}, counts: counts}
	if w.counts == nil {
		w.counts = new(Counts)
	}
	headers := defaultHeaders
	if cfg.Headers != nil {
		headers = *cfg.Headers
	}
	for _, h := range headers {
		if _, err := source.Parse("header." + h); err != nil {
			return nil, fmt.Errorf("waf.headers: %q is not a header name", h)
		}
		w.headers = append(w.headers, strings.ToLower(h))
	}
	switch cfg.OtherBodies {
	case "", "inspect":
		w.other = inspectOther
	case "refuse":
		w.other = refuseOther
	case "pass":
		w.other = passOther
	default:
		return nil, fmt.Errorf("waf.other_bodies %q: want inspect, refuse or pass", cfg.OtherBodies)
	}
	switch cfg.Level {
	case "", "block":
		w.level = Block
	case "log":
		w.level = Log
	case "off":
		w.level = Off
	default:
		return nil, fmt.Errorf("waf.level %q: want off, log or block", cfg.Level)
	}
	if len(cfg.Checks) == 0 {
		w.sqli, w.xss = true, true
	}
	for _, c := range cfg.Checks {
		switch c {
		case "sqli":
			w.sqli = true
		case "xss":
			w.xss = true
		default:
			return nil, fmt.Errorf("waf.checks: %q is not sqli or xss", c)
		}
	}
	for _, a := range cfg.Allow {
		param, value, hasValue := strings.Cut(a, "=")
		if param != "*" && param != "path" && param != "body" {
			s, err := source.Parse(param)
			switch {
			case err != nil || s.Kind > source.JSON:
				return nil, fmt.Errorf("waf.allow %q: want query.NAME, form.NAME, json.a.b, cookie.NAME, header.NAME, path, body or *, optionally =VALUE", a)
			case s.Kind == source.Header:
				param = "header." + strings.ToLower(s.Name) // field names have no case
			}
		}
		if hasValue {
			w.allowVal[param+"="+value] = true
			w.maxValue = max(w.maxValue, len(value))
		} else {
			if param == "*" {
				return nil, fmt.Errorf("waf.allow %q: * needs a value (*=VALUE)", a)
			}
			w.skip[param] = true
		}
	}
	return w, nil
}

// Counts returns the route's detection counters.
func (w *WAF) Counts() *Counts { return w.counts }

// Handle implements pipeline.Filter.
func (w *WAF) Handle(c *pipeline.Ctx) pipeline.Verdict {
	if w.level == Off {
		return pipeline.Continue
	}
	r := source.NewReader(c)
	found := none
	unread := r.EachValue(func(k source.Kind, name, value []byte) bool {
		found = w.check(k, name, value)
		return found == none
	})
	if found == none {
		found = w.inspectFields(c)
	}
	why := readWhole
	if found == none {
		found, why = w.body(c, unread)
	}
	if found != none {
		return w.detected(c, found)
	}
	if why == readWhole {
		return pipeline.Continue
	}
	w.counts.Hidden.Add(1)
	w.counts.Unread[why].Add(1)
	if w.level == Log {
		c.Decision = logHidden[why]
		return pipeline.Continue
	}
	w.counts.Blocked.Add(1)
	return c.Reject(refusals[why])
}

// check inspects one value unless it is empty or allow-listed.
func (w *WAF) check(k source.Kind, name, value []byte) finding {
	if len(value) == 0 || w.allowed(k, name, value) {
		return none
	}
	return w.inspect(value)
}

// detected counts a finding and blocks or logs it.
func (w *WAF) detected(c *pipeline.Ctx, found finding) pipeline.Verdict {
	if found == sqli {
		w.counts.SQLi.Add(1)
	} else {
		w.counts.XSS.Add(1)
	}
	if w.level == Log {
		if found == sqli {
			c.Decision = logSQLi
		} else {
			c.Decision = logXSS
		}
		return pipeline.Continue
	}
	w.counts.Blocked.Add(1)
	if found == sqli {
		return c.Reject(blockSQLi)
	}
	return c.Reject(blockXSS)
}

// maySQLi and mayXSS skip values that cannot carry an injection, so the
// detectors (which allocate as they run) see only the few that might: a
// value made only of letters, digits and '.', '_', '@', and single '-'
// (ids, numbers, enums, e-mail addresses, UUIDs, dates) is neither SQL
// nor markup; markup needs one of <>"'`=:( or an escape (&, %, \).
func maySQLi(v []byte) bool {
	for i, b := range v {
		switch {
		case 'a' <= b|0x20 && b|0x20 <= 'z', '0' <= b && b <= '9', b == '.', b == '_', b == '@':
		case b == '-' && (i+1 == len(v) || v[i+1] != '-'):
		default:
			return true
		}
	}
	return false
}

func mayXSS(v []byte) bool {
	for _, b := range v {
		switch b {
		case '<', '>', '"', '\'', '`', '=', ':', '(', '&', '%', '\\':
			return true
		}
	}
	return false
}

// maxDecodes is how many more times a value holding escapes is decoded
// and checked again, as a backend that decodes twice (or a proxy and a
// backend that decode once each) would read it: "%2527" hides "'".
const maxDecodes = 2

// decodeBufs holds the buffers of those extra decodings.
var decodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// inspect runs the detectors on value, and again on what it decodes to.
func (w *WAF) inspect(value []byte) finding {
	if f := w.detect(value); f != none || bytes.IndexByte(value, '%') < 0 {
		return f
	}
	bp, bq := decodeBufs.Get().(*[]byte), decodeBufs.Get().(*[]byte)
	defer decodeBufs.Put(bp)
	defer decodeBufs.Put(bq)
	cur := value
	for range maxDecodes {
		next := source.AppendDecoded((*bp)[:0], cur)
		*bp = next
		if bytes.Equal(next, cur) {
			return none
		}
		if f := w.detect(next); f != none {
			return f
		}
		if bytes.IndexByte(next, '%') < 0 {
			return none
		}
		cur = next
		bp, bq = bq, bp // the next round decodes from this one into the other
	}
	return none
}

func (w *WAF) detect(value []byte) finding {
	v := bytesconv.B2S(value)
	if w.sqli && maySQLi(value) {
		if hit, fingerprint := libinjection.IsSQLi(v); hit && !arithmetic(value, fingerprint) || tautology(value) || quoteComment(value) {
			return sqli
		}
	}
	if w.xss && mayXSS(value) && (scriptURL(value) || libinjection.IsXSS(v)) {
		return xss
	}
	return none
}

type finding uint8

const (
	none finding = iota
	sqli
	xss
)

// allowed reports an allow-listed parameter or value. Keys are built on
// the stack; a value longer than every allowed value is never allowed.
func (w *WAF) allowed(k source.Kind, name, value []byte) bool {
	if len(w.skip) == 0 && len(w.allowVal) == 0 {
		return false
	}
	var arr [256]byte
	key := append(arr[:0], k.String()...)
	if k != source.Path {
		key = append(key, '.')
		key = append(key, name...)
	}
	if w.skip[bytesconv.B2S(key)] {
		return true
	}
	if len(w.allowVal) == 0 || len(value) > w.maxValue || len(key)+1+len(value) > len(arr) {
		return false
	}
	n := len(key)
	key = append(key, '=')
	key = append(key, value...)
	if w.allowVal[bytesconv.B2S(key)] {
		return true
	}
	// "*=VALUE": the same value allowed in any parameter.
	key = append(append(key[:0], '*', '='), key[n+1:]...)
	return w.allowVal[bytesconv.B2S(key)]
}

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "waf", Stage: pipeline.StageScreen, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(Config) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			c := cfg.(*Config)
			counts := b.State.Get("waf.counts|"+b.Route.Name, func() (any, func()) { return new(Counts), nil }).(*Counts)
			w, err := New(*c, counts)
			if err != nil || w.level == Off {
				return nil, err
			}
			return w, nil
		},
	})
}
