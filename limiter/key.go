package limiter

import (
	"fmt"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
)

// dimKind is what a rule counts by.
type dimKind uint8

const (
	dimRoute  dimKind = iota // one counter for the whole route (REQUEST)
	dimIP                    // the client address (c.ClientIP), IPv6 by prefix
	dimSource                // any request value: consumer, user, header, cookie, query, form, json, path, method
)

// dimension is a rule's key: how a request's counter is found.
type dimension struct {
	kind dimKind
	src  source.Source
	// v6bits groups IPv6 clients by prefix: one holder of a /64 has 2^64
	// addresses, so counting per address would let them walk around any
	// per-IP limit and fill the table.
	v6bits int
	text   string
}

// DefaultIPv6Prefix is how IPv6 clients are grouped by default.
const DefaultIPv6Prefix = 64

// parseDimension reads a rule's `by`.
func parseDimension(by string, v6bits int) (dimension, error) {
	switch by {
	case "", "route", "request", "REQUEST":
		return dimension{kind: dimRoute, text: "route"}, nil
	case "ip":
		if v6bits == 0 {
			v6bits = DefaultIPv6Prefix
		}
		if v6bits < 8 || v6bits > 128 {
			return dimension{}, fmt.Errorf("ipv6_prefix %d: want 8..128", v6bits)
		}
		return dimension{kind: dimIP, v6bits: v6bits, text: "ip"}, nil
	case "session":
		return dimension{}, fmt.Errorf("by: session: name where the session is, header.NAME or cookie.NAME")
	}
	src, err := source.Parse(by)
	if err != nil {
		return dimension{}, fmt.Errorf("by: %v; or route, ip", err)
	}
	if src.Kind == source.IP {
		return parseDimension("ip", v6bits)
	}
	return dimension{kind: dimSource, src: src, text: by}, nil
}

// isConsumer reports a dimension read from the authenticated consumer.
func (d *dimension) isConsumer() bool { return d.kind == dimSource && d.src.Kind == source.Consumer }

// missingKey is the shared counter of requests that lack the dimension's
// value: they are limited together, never let through unlimited.
const missingKey = "\x00missing"

// value finds the request's value of the dimension. It returns the bytes
// (borrowed from the request or c.Scratch, valid until the next lookup)
// and false when the request lacks it. The route dimension's value is "".
func (d *dimension) value(c *pipeline.Ctx, r *source.Reader) ([]byte, bool) {
	switch d.kind {
	case dimRoute:
		return nil, true
	case dimIP:
		ip := c.ClientIP
		if !ip.IsValid() {
			return nil, false
		}
		ip = ip.Unmap()
		if ip.Is6() && d.v6bits < 128 {
			if p, err := ip.Prefix(d.v6bits); err == nil {
				ip = p.Addr()
			}
		}
		c.Scratch = ip.AppendTo(c.Scratch[:0])
		return c.Scratch, true
	}
	v, found := r.Value(&d.src)
	if found != source.Scalar {
		return nil, false
	}
	return v, true
}

// hasher is a seeded 64-bit hash: keys an attacker picks cannot be made
// to collide with someone else's without knowing the seed.
type hasher struct{ seed uint64 }

func (h hasher) sum(b []byte) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(h.seed)
	_, _ = d.Write(b)
	return d.Sum64()
}

func (h hasher) missing() uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(^h.seed)
	_, _ = d.WriteString(missingKey)
	return d.Sum64()
}

// redisValue is how a key's value appears in its Redis key, inside the
// hash tag: printable, bounded and unambiguous. Short values of safe
// characters are kept as they are (readable with redis-cli); anything else
// becomes "~" and 32 hex digits of its SHA-256 (128 bits: no collision an
// attacker can find). The missing key is "!missing".
func redisValue(v []byte, missing bool) string {
	if missing {
		return "!missing"
	}
	if len(v) > 0 && len(v) <= 64 {
		safe := true
		for _, b := range v {
			if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("._:@-", b) >= 0) {
				safe = false
				break
			}
		}
		if safe {
			return string(v)
		}
	}
	return "~" + digestHex(v, 16)
}
