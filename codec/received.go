package codec

import (
	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/valyala/fasthttp"
)

// Received is a client's header section as Check read it: where each
// field's name and value are, and where the trace fields are, so that the
// steps after the check (the trace, the forwarding) take the fields from
// here instead of reading the section again. Its bytes alias the request's
// header: it is valid until the request is reset, and must be Reset with
// it (the next request's section may sit at the same address).
//
// The zero value is ready to use; it allocates only while its buffer
// grows.
type Received struct {
	raw    []byte // the section indexed, h.RawHeaders()
	fields []receivedField
	// Where the first traceparent and X-Request-Id are, as an index into
	// fields plus one (0 for none): the first, as fasthttp's Peek gives.
	traceparent, requestID int
}

// receivedField locates a field's name (raw[ks:ke]) and value, without
// the whitespace around it (raw[vs:ve]).
type receivedField struct{ ks, ke, vs, ve int32 }

// keptFields is the most fields an index keeps room for between
// requests: a client sending thousands of tiny fields (a 8 KiB section
// holds 2,000) does not leave every pooled context holding an index
// that large.
const keptFields = 256

// Reset forgets the section, keeping the buffer unless it grew past
// keptFields.
func (r *Received) Reset() {
	r.raw, r.fields = nil, r.fields[:0]
	if cap(r.fields) > keptFields {
		r.fields = nil
	}
	r.traceparent, r.requestID = 0, 0
}

// Check is codec.Check that also indexes h's section in r. On an error r
// indexes nothing.
func (r *Received) Check(h *fasthttp.RequestHeader, lim *Limits) error {
	r.Reset()
	if err := check(h, lim, r); err != nil {
		r.Reset()
		return err
	}
	r.raw = h.RawHeaders()
	return nil
}

// indexes reports whether r holds the index of h's section.
func (r *Received) indexes(h *fasthttp.RequestHeader) bool {
	raw := h.RawHeaders()
	return len(r.raw) > 0 && len(raw) == len(r.raw) && &raw[0] == &r.raw[0]
}

// add records a field line of the section; name and value are slices of
// it (offsets come from their capacities, which end where the section's
// buffer ends).
func (r *Received) add(section, name, value []byte) {
	ks := cap(section) - cap(name)
	vs := cap(section) - cap(value)
	r.fields = append(r.fields, receivedField{int32(ks), int32(ks + len(name)), int32(vs), int32(vs + len(value))})
	n := len(r.fields)
	switch {
	case r.traceparent == 0 && ascii.EqualFold(name, "traceparent"):
		r.traceparent = n
	case r.requestID == 0 && ascii.EqualFold(name, "X-Request-Id"):
		r.requestID = n
	}
}

// field returns field i of the section.
func (r *Received) field(i int) (name, value []byte) {
	f := r.fields[i]
	return r.raw[f.ks:f.ke], r.raw[f.vs:f.ve]
}

// Traceparent returns the value of h's first traceparent field, or nil.
func (r *Received) Traceparent(h *fasthttp.RequestHeader) []byte {
	return r.peek(h, r.traceparent, strTraceparentName)
}

// RequestID returns the value of h's first X-Request-Id field, or nil.
func (r *Received) RequestID(h *fasthttp.RequestHeader) []byte {
	return r.peek(h, r.requestID, strRequestIDName)
}

var (
	strTraceparentName = []byte("traceparent")
	strRequestIDName   = []byte("X-Request-Id")
)

func (r *Received) peek(h *fasthttp.RequestHeader, at int, name []byte) []byte {
	if !r.indexes(h) {
		return h.PeekBytes(name) // not checked here: a refused request's, or one built by hand
	}
	if at == 0 {
		return nil
	}
	_, v := r.field(at - 1)
	return v
}
