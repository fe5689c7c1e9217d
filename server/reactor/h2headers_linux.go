//go:build linux

package reactor

import (
	"errors"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A header block (HEADERS, then CONTINUATION frames until END_HEADERS) is
// decoded as its fragments come, into fields the connection keeps from
// one block to the next: x/net's MetaHeadersFrame made a frame, a field
// slice and two closures per request. Its checks are kept: names lowercase
// tokens, values without CR, LF or NUL, pseudo-fields before the others,
// the list bounded by the advertised limit while it is read, and a
// CONTINUATION flood cut (CVE-2023-45288).

var errBadField = errors.New("h2: invalid header field")

// headerBlock is the block being read.
type headerBlock struct {
	id         uint32
	endStream  bool
	priority   http2.PriorityParam
	hasPrio    bool
	fields     []hpack.HeaderField
	remain     uint32 // of the header-list limit
	truncated  bool   // past the limit: answered 431
	invalid    error  // a field the checks refuse: the stream is reset
	sawRegular bool
	reading    bool
}

// startBlock begins reading the block of f.
func (h *h2Conn) startBlock(f *http2.HeadersFrame) error {
	b := &h.block
	clear(b.fields)
	*b = headerBlock{id: f.StreamID, endStream: f.StreamEnded(), priority: f.Priority, hasPrio: f.HasPriority(),
		fields: b.fields[:0], remain: h.headerListLimit(), reading: true}
	h.dec.SetEmitEnabled(true)
	return h.blockFragment(f.HeaderBlockFragment(), f.HeadersEnded(), true)
}

// blockFragment decodes one fragment of the block; at its end the
// request is acted on.
func (h *h2Conn) blockFragment(frag []byte, ended, first bool) error {
	b := &h.block
	// A fragment far past what the limit leaves (after the list was
	// found too long, any), or any CONTINUATION after an invalid field,
	// ends the connection: a block already refused is not read on.
	if int64(len(frag)) > 2*int64(b.remain) || b.invalid != nil && !first {
		return h2ConnError{http2.ErrCodeProtocol, "header_list_too_large"}
	}
	if _, err := h.dec.Write(frag); err != nil {
		return h2ConnError{http2.ErrCodeCompression, "hpack"}
	}
	if !ended {
		return nil
	}
	b.reading = false
	if err := h.dec.Close(); err != nil {
		return h2ConnError{http2.ErrCodeCompression, "hpack"}
	}
	if b.invalid != nil {
		h.noteSeen(b.id)
		h.refused("stream", http2.ErrCodeProtocol, "invalid_header")
		h.resetStream(b.id, http2.ErrCodeProtocol)
		return nil
	}
	return h.onHeaders(b)
}

// onField is the decoder's emit function: it checks and keeps a field.
func (h *h2Conn) onField(f hpack.HeaderField) {
	b := &h.block
	if !httpguts.ValidHeaderFieldValue(f.Value) {
		b.invalid = errBadField
	}
	if strings.HasPrefix(f.Name, ":") {
		if b.sawRegular {
			b.invalid = errBadField
		}
	} else {
		b.sawRegular = true
		if !validWireName(f.Name) {
			b.invalid = errBadField
		}
	}
	if b.invalid != nil {
		h.dec.SetEmitEnabled(false)
		return
	}
	if size := f.Size(); size > b.remain {
		h.dec.SetEmitEnabled(false)
		b.truncated, b.remain = true, 0
		return
	} else {
		b.remain -= size
	}
	b.fields = append(b.fields, f)
}

// validWireName reports a lowercase token (RFC 9113 §8.2.1).
func validWireName(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !httpguts.IsTokenRune(rune(c)) || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}
