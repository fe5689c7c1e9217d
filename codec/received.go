package codec

import (
	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/valyala/fasthttp"
)

// Received is a client's header section as Check read it: where each
// field's name and value are, so that the steps after the check (the
// trace, the forwarding) take the fields from here instead of parsing the
// section again. Its bytes alias the request's
// header: it is valid until the request is reset, and must be Reset with
// it (the next request's section may sit at the same address).
//
// The zero value is ready to use; it allocates only while its buffer
// grows.
type Received struct {
	raw    []byte // the section indexed, h.RawHeaders()
	fields []receivedField
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
}

// field returns field i of the section.
func (r *Received) field(i int) (name, value []byte) {
	f := r.fields[i]
	return r.raw[f.ks:f.ke], r.raw[f.vs:f.ve]
}

// Peek returns the value of h's first field named name (compared with
// ASCII case folded), or nil: the first, as fasthttp's Peek gives. It
// reads the index when r holds h's, the header itself otherwise (a
// refused request's, or one built by hand).
func (r *Received) Peek(h *fasthttp.RequestHeader, name string) []byte {
	if !r.indexes(h) {
		return h.Peek(name)
	}
	for i := range r.fields {
		f := &r.fields[i]
		if int(f.ke-f.ks) == len(name) && ascii.EqualFold(r.raw[f.ks:f.ke], name) {
			return r.raw[f.vs:f.ve]
		}
	}
	return nil
}
