package route

import (
	"bytes"
	"fmt"
	"regexp"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
)

// Rewrite is a filter that sets the path (and Host) the backend gets. It
// runs after matching, so the route table always sees the client's path,
// and it works on the canonical path as routed: its result is an encoded
// path, never decoded again, and it must itself be canonical (a prefix cut
// that leaves "../x" is refused, not normalized away upstream).
type Rewrite struct {
	path        []byte
	stripPrefix []byte
	addPrefix   []byte
	re          *regexp.Regexp
	replace     []byte
	host        []byte
}

// RewriteSpec is the configuration of a Rewrite; Path, the prefix pair and
// the Regex pair are alternatives. Paths and prefixes are written in
// canonical form (escapes of reserved characters kept, e.g. "%2F"); a regex
// matches the canonical path and its replacement is such a path.
type RewriteSpec struct {
	Path, StripPrefix, AddPrefix, Regex, Replace, Host string
}

// errRewriteEscapes answers a request whose rewritten path is not
// canonical: the client's path made the rewrite produce a dot segment or
// another ambiguous form.
var errRewriteEscapes = pipeline.NewCanned(400, "malformed request: path not allowed by the route's rewrite")

// NewRewrite validates and compiles a rewrite.
func NewRewrite(s RewriteSpec) (*Rewrite, error) {
	modes := 0
	for _, set := range []bool{s.Path != "", s.StripPrefix != "" || s.AddPrefix != "", s.Regex != ""} {
		if set {
			modes++
		}
	}
	if modes > 1 {
		return nil, fmt.Errorf("rewrite: use one of path, strip_prefix/add_prefix, regex/replace")
	}
	rw := &Rewrite{path: []byte(s.Path), stripPrefix: []byte(s.StripPrefix), addPrefix: []byte(s.AddPrefix), host: []byte(s.Host)}
	for _, p := range []struct{ name, v string }{{"path", s.Path}, {"add_prefix", s.AddPrefix}, {"strip_prefix", s.StripPrefix}} {
		if p.v == "" {
			continue
		}
		if p.v[0] != '/' {
			return nil, fmt.Errorf("rewrite.%s %q must start with /", p.name, p.v)
		}
		if canon, err := codec.CanonicalPath(p.v); err != nil || canon != p.v {
			return nil, fmt.Errorf("rewrite.%s %q is not a canonical path (write %q)", p.name, p.v, canon)
		}
	}
	if s.Host != "" && !codec.ValidHost([]byte(s.Host)) {
		return nil, fmt.Errorf("rewrite.host %q is not a valid host[:port]", s.Host)
	}
	if s.Regex != "" {
		re, err := regexp.Compile(s.Regex)
		if err != nil {
			return nil, fmt.Errorf("rewrite.regex: %v", err)
		}
		if s.Replace == "" || s.Replace[0] != '/' {
			return nil, fmt.Errorf("rewrite.replace %q must start with /", s.Replace)
		}
		rw.re, rw.replace = re, []byte(s.Replace)
	} else if s.Replace != "" {
		return nil, fmt.Errorf("rewrite.replace needs rewrite.regex")
	}
	if modes == 0 && s.Host == "" {
		return nil, fmt.Errorf("rewrite changes nothing")
	}
	return rw, nil
}

// Handle implements pipeline.Filter. Prefix and fixed rewrites allocate
// nothing; a regex rewrite allocates its match indexes.
func (rw *Rewrite) Handle(c *pipeline.Ctx) pipeline.Verdict {
	path := c.Target.Path
	switch {
	case len(rw.path) > 0:
		c.SetUpstreamPath(append(c.UpstreamPathBuffer(), rw.path...))
	case rw.re != nil:
		if m := rw.re.FindSubmatchIndex(path); m != nil {
			out := rw.re.Expand(c.UpstreamPathBuffer(), rw.replace, path, m)
			if !rw.canonical(c, out) {
				return c.Reject(errRewriteEscapes)
			}
			c.SetUpstreamPath(out)
		}
	case len(rw.stripPrefix) > 0 || len(rw.addPrefix) > 0:
		rest := path
		if len(rw.stripPrefix) > 0 {
			if !bytes.HasPrefix(path, rw.stripPrefix) {
				break
			}
			rest = path[len(rw.stripPrefix):]
		}
		b := append(c.UpstreamPathBuffer(), rw.addPrefix...)
		if len(rest) == 0 || rest[0] != '/' {
			if len(b) == 0 || b[len(b)-1] != '/' {
				b = append(b, '/')
			}
		} else if len(b) > 0 && b[len(b)-1] == '/' {
			rest = rest[1:]
		}
		b = append(b, rest...)
		if !rw.canonical(c, b) {
			return c.Reject(errRewriteEscapes)
		}
		c.SetUpstreamPath(b)
	}
	if len(rw.host) > 0 {
		c.UpstreamHost = rw.host
	}
	return pipeline.Continue
}

// canonical reports whether a rewrite's result may go upstream as it is.
func (rw *Rewrite) canonical(c *pipeline.Ctx, p []byte) bool {
	var ok bool
	c.Scratch, ok = codec.IsCanonicalPath(c.Scratch, p)
	return ok
}
