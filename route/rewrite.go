package route

import (
	"bytes"
	"fmt"
	"regexp"

	"github.com/tollgate/tollgate/pipeline"
)

// Rewrite is a filter that changes the request's path (and Host) before it
// goes upstream. It runs after matching, so the route table always sees the
// client's path.
type Rewrite struct {
	path        []byte
	stripPrefix []byte
	addPrefix   []byte
	re          *regexp.Regexp
	replace     string
	host        []byte
}

// RewriteSpec is the configuration of a Rewrite; Path, the prefix pair and
// the Regex pair are alternatives.
type RewriteSpec struct {
	Path, StripPrefix, AddPrefix, Regex, Replace, Host string
}

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
	if s.Path != "" && s.Path[0] != '/' {
		return nil, fmt.Errorf("rewrite.path %q must start with /", s.Path)
	}
	if s.AddPrefix != "" && s.AddPrefix[0] != '/' {
		return nil, fmt.Errorf("rewrite.add_prefix %q must start with /", s.AddPrefix)
	}
	if s.Regex != "" {
		re, err := regexp.Compile(s.Regex)
		if err != nil {
			return nil, fmt.Errorf("rewrite.regex: %v", err)
		}
		if s.Replace == "" || s.Replace[0] != '/' {
			return nil, fmt.Errorf("rewrite.replace %q must start with /", s.Replace)
		}
		rw.re, rw.replace = re, s.Replace
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
	uri := c.Req.URI()
	switch {
	case len(rw.path) > 0:
		uri.SetPathBytes(rw.path)
	case rw.re != nil:
		path := uri.Path()
		if m := rw.re.FindSubmatchIndex(path); m != nil {
			c.Scratch = rw.re.Expand(c.Scratch[:0], []byte(rw.replace), path, m)
			uri.SetPathBytes(c.Scratch)
		}
	case len(rw.stripPrefix) > 0 || len(rw.addPrefix) > 0:
		path := uri.Path()
		rest := path
		if len(rw.stripPrefix) > 0 {
			if !bytes.HasPrefix(path, rw.stripPrefix) {
				break
			}
			rest = path[len(rw.stripPrefix):]
		}
		b := append(c.Scratch[:0], rw.addPrefix...)
		if len(rest) == 0 || rest[0] != '/' {
			if len(b) == 0 || b[len(b)-1] != '/' {
				b = append(b, '/')
			}
		} else if len(b) > 0 && b[len(b)-1] == '/' {
			rest = rest[1:]
		}
		b = append(b, rest...)
		c.Scratch = b
		uri.SetPathBytes(b)
	}
	if len(rw.host) > 0 {
		c.Req.Header.SetHostBytes(rw.host)
		uri.SetHostBytes(rw.host)
	}
	return pipeline.Continue
}
