package waf

import (
	"bytes"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
)

// inspectFields checks each cookie (name and value) and the configured
// header fields, every occurrence of each: a backend that logs a
// User-Agent into SQL or shows a Referer back in a page reads them as
// data too.
func (w *WAF) inspectFields(c *pipeline.Ctx) finding {
	for name, value := range codec.Fields(&c.Req.Header) {
		if len(value) == 0 {
			continue
		}
		if ascii.EqualFold(name, "cookie") {
			if f := w.inspectCookies(value); f != none {
				return f
			}
			continue
		}
		for _, h := range w.headers {
			if len(name) == len(h) && ascii.EqualFold(name, h) {
				if f := w.checkField(source.Header, bytesconv.S2B(h), value); f != none {
					return f
				}
				break
			}
		}
	}
	return none
}

// inspectCookies checks the pairs of one Cookie field ("a=1; b=2").
func (w *WAF) inspectCookies(v []byte) finding {
	for len(v) > 0 {
		pair := v
		if i := bytes.IndexByte(v, ';'); i >= 0 {
			pair, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		pair = ascii.TrimOWS(pair)
		name, value := pair, pair[len(pair):]
		if i := bytes.IndexByte(pair, '='); i >= 0 {
			name, value = pair[:i], pair[i+1:]
		}
		if f := w.check(source.Cookie, nil, name); f != none {
			return f
		}
		if f := w.checkField(source.Cookie, name, value); f != none {
			return f
		}
	}
	return none
}

// body decides about a body EachValue did not read whole: a finding in a
// text body of another media type (checked whole as one value when the
// route inspects other bodies), or the reason it must be refused. A body
// of another media type matters only when the route inspects it or
// refuses it; a JSON, urlencoded or multipart body always does.
func (w *WAF) body(c *pipeline.Ctx, unread source.Unread) (finding, reason) {
	ct := c.Req.Header.ContentType()
	matters := source.MediaOf(ct) != source.MediaOther || w.other == refuseOther || w.other == inspectOther && textual(ct)
	switch unread {
	case source.ReadAll:
		return none, readWhole
	case source.BadJSON:
		return none, unreadableJSON
	case source.TooDeep:
		return none, tooDeep
	case source.BadMultipart:
		return none, unreadableMultipart
	case source.Streamed:
		if matters {
			return none, tooLarge
		}
	case source.Encoded:
		if matters {
			return none, unknownEncoding
		}
	case source.OtherMedia:
		switch {
		case w.other == refuseOther:
			return none, unknownMediaType
		case matters && !w.skip["body"]:
			return w.inspect(c.Req.Body()), readWhole
		}
	}
	return none, readWhole
}

// textual reports a Content-Type of text a backend may parse for values
// (or none at all, which many backends sniff): text/*, XML.
func textual(ct []byte) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = ascii.TrimOWS(ct)
	return len(ct) == 0 || ascii.HasPrefixFold(ct, "text/") || ascii.EqualFold(ct, "application/xml") ||
		len(ct) > len("+xml") && ascii.EqualFold(ct[len(ct)-len("+xml"):], "+xml")
}
