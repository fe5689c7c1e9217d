package transcode

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/tollgate/tollgate/internal/bytesconv"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// wireEncoder turns JSON into protobuf wire bytes, appended to out. A
// nested message's length is written before its bytes: one byte is
// reserved, and when the message turns out longer than 127 bytes its
// bytes are moved up to make room (no second pass, nothing allocated).
type wireEncoder struct {
	sc    jsonScanner
	out   []byte
	depth int
}

var errTooDeep = errors.New("exceeded max recursion depth")

// encode appends the message mp read from body, which must hold exactly
// one JSON value.
func (e *wireEncoder) encode(mp *messagePlan, body []byte) error {
	e.sc.reset(body)
	e.depth = 0
	err := e.message(mp)
	if err == nil {
		err = e.sc.end()
	}
	if err != nil {
		line, col := position(body, e.sc.pos)
		return fmt.Errorf("(line %d:%d): %w", line, col, err)
	}
	return nil
}

func (e *wireEncoder) beginLen() int {
	e.out = append(e.out, 0)
	return len(e.out)
}

func (e *wireEncoder) endLen(start int) {
	n := len(e.out) - start
	size := protowire.SizeVarint(uint64(n))
	if size > 1 {
		e.out = append(e.out, make([]byte, size-1)...)
		copy(e.out[start+size-1:], e.out[start:start+n])
	}
	protowire.AppendVarint(e.out[:start-1], uint64(n))
}

func (e *wireEncoder) message(mp *messagePlan) error {
	if e.depth++; e.depth > maxDepth {
		return errTooDeep
	}
	defer func() { e.depth-- }()
	if mp.wk != wkNone {
		return e.wellKnown(mp)
	}
	if err := e.sc.expect('{'); err != nil {
		return err
	}
	if e.sc.peek() == '}' {
		e.sc.pos++
		return nil
	}
	var seenFields, seenOneofs bitset
	seenFields.init(len(mp.fields))
	seenOneofs.init(mp.oneofs)
	for {
		name, err := e.sc.str()
		if err != nil {
			return err
		}
		idx, ok := mp.byName[string(name)]
		if !ok {
			return fmt.Errorf("unknown field %q", name)
		}
		if err := e.sc.expect(':'); err != nil {
			return err
		}
		f := &mp.fields[idx]
		if seenFields.testAndSet(idx) {
			return fmt.Errorf("duplicate field %q", f.jsonName)
		}
		takesNull := (f.msg != nil && f.msg.wk == wkValue && !f.isMap) || (f.enum != nil && f.enum.nullValue)
		if e.sc.peek() == 'n' && !takesNull && e.sc.literal("null") {
			// null leaves the field unset.
		} else if err := e.field(f, &seenOneofs); err != nil {
			return err
		}
		more, err := e.sc.more('}')
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}

func (e *wireEncoder) field(f *fieldPlan, seenOneofs *bitset) error {
	switch {
	case f.isMap:
		return e.mapField(f)
	case f.list:
		return e.listField(f)
	}
	if f.oneof >= 0 && seenOneofs.testAndSet(f.oneof) {
		return fmt.Errorf("field %q: its oneof is already set", f.jsonName)
	}
	return e.value(f, f.num, !f.presence)
}

// value reads one value of f's kind and appends it as field num, leaving
// it out when omitZero and it is its type's zero.
func (e *wireEncoder) value(f *fieldPlan, num protowire.Number, omitZero bool) error {
	start := len(e.out)
	switch f.kind {
	case protoreflect.MessageKind:
		e.out = protowire.AppendTag(e.out, num, protowire.BytesType)
		at := e.beginLen()
		if err := e.message(f.msg); err != nil {
			return err
		}
		e.endLen(at)
	case protoreflect.StringKind:
		s, err := e.sc.str()
		if err != nil {
			return e.invalid(f, err)
		}
		if omitZero && len(s) == 0 {
			return nil
		}
		e.out = protowire.AppendTag(e.out, num, protowire.BytesType)
		e.out = protowire.AppendBytes(e.out, s)
	case protoreflect.BytesKind:
		e.out = protowire.AppendTag(e.out, num, protowire.BytesType)
		at := e.beginLen()
		if err := e.base64(f); err != nil {
			return err
		}
		if omitZero && len(e.out) == at {
			e.out = e.out[:start]
			return nil
		}
		e.endLen(at)
	default:
		v, err := e.numeric(f)
		if err != nil {
			return err
		}
		if omitZero && v == 0 {
			return nil
		}
		e.out = protowire.AppendTag(e.out, num, wireType(f.kind))
		e.out = appendBits(e.out, f.kind, v)
	}
	return nil
}

func appendBits(out []byte, k protoreflect.Kind, v uint64) []byte {
	switch wireType(k) {
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(out, uint32(v))
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(out, v)
	}
	return protowire.AppendVarint(out, v)
}

func (e *wireEncoder) invalid(f *fieldPlan, err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("invalid value for %s field %s", f.kind, f.jsonName)
}

// base64 decodes a string the way protojson does (standard or URL
// alphabet, padded or not) straight into out.
func (e *wireEncoder) base64(f *fieldPlan) error {
	s, err := e.sc.str()
	if err != nil {
		return e.invalid(f, err)
	}
	enc := base64.StdEncoding
	for _, c := range s {
		if c == '-' || c == '_' {
			enc = base64.URLEncoding
			break
		}
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	at := len(e.out)
	e.out = growBy(e.out, enc.DecodedLen(len(s)))
	n, err := enc.Decode(e.out[at:], s)
	if err != nil {
		return e.invalid(f, nil)
	}
	e.out = e.out[:at+n]
	return nil
}

// growBy extends b by n bytes (their content unspecified).
func growBy(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// numeric reads a value of a varint or fixed kind and returns its wire
// bits.
func (e *wireEncoder) numeric(f *fieldPlan) (uint64, error) {
	switch f.kind {
	case protoreflect.BoolKind:
		switch {
		case e.sc.literal("true"):
			return 1, nil
		case e.sc.literal("false"):
			return 0, nil
		}
		return 0, e.invalid(f, nil)
	case protoreflect.EnumKind:
		return e.enumValue(f)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		bits := 64
		if f.kind == protoreflect.FloatKind {
			bits = 32
		}
		v, ok, err := e.float(bits)
		if err != nil || !ok {
			return 0, e.invalid(f, err)
		}
		if bits == 32 {
			return uint64(math.Float32bits(float32(v))), nil
		}
		return math.Float64bits(v), nil
	}
	text, err := e.numberText()
	if err != nil || text == nil {
		return 0, e.invalid(f, err)
	}
	var buf [48]byte
	digits, ok := intText(text, &buf)
	if !ok {
		return 0, e.invalid(f, nil)
	}
	s := bytesconv.B2S(digits)
	switch f.kind {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return 0, e.invalid(f, nil)
		}
		return signedBits(f.kind, n), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, e.invalid(f, nil)
		}
		return signedBits(f.kind, n), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, e.invalid(f, nil)
		}
		return n, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, e.invalid(f, nil)
	}
	return n, nil
}

func signedBits(k protoreflect.Kind, n int64) uint64 {
	switch k {
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return protowire.EncodeZigZag(n)
	case protoreflect.Sfixed32Kind:
		return uint64(uint32(n))
	}
	return uint64(n)
}

// numberText reads a number, or a string holding exactly one number (as
// protojson takes 64-bit integers and any other); nil when the value is
// neither.
func (e *wireEncoder) numberText() ([]byte, error) {
	switch c := e.sc.peek(); {
	case c == '"':
		s, err := e.sc.str()
		if err != nil {
			return nil, err
		}
		if n, ok := numberLen(s); !ok || n != len(s) {
			return nil, nil
		}
		return s, nil
	case c == '-' || ('0' <= c && c <= '9'):
		return e.sc.number()
	}
	return nil, nil
}

// float reads a float the way protojson does: a number, or a string
// holding a number, "NaN", "Infinity" or "-Infinity".
func (e *wireEncoder) float(bits int) (float64, bool, error) {
	if e.sc.peek() == '"' {
		s, err := e.sc.str()
		if err != nil {
			return 0, false, err
		}
		switch string(s) {
		case "NaN":
			return math.NaN(), true, nil
		case "Infinity":
			return math.Inf(1), true, nil
		case "-Infinity":
			return math.Inf(-1), true, nil
		}
		if n, ok := numberLen(s); !ok || n != len(s) {
			return 0, false, nil
		}
		v, err := strconv.ParseFloat(bytesconv.B2S(s), bits)
		return v, err == nil, nil
	}
	text, err := e.numberText()
	if err != nil || text == nil {
		return 0, false, err
	}
	v, err := strconv.ParseFloat(bytesconv.B2S(text), bits)
	return v, err == nil, nil
}

func (e *wireEncoder) enumValue(f *fieldPlan) (uint64, error) {
	switch c := e.sc.peek(); {
	case c == '"':
		s, err := e.sc.str()
		if err != nil {
			return 0, err
		}
		if n, ok := f.enum.byName[string(s)]; ok {
			return uint64(int64(n)), nil
		}
		return 0, fmt.Errorf("invalid value for enum field %s: %q", f.jsonName, s)
	case c == 'n' && f.enum.nullValue:
		if e.sc.literal("null") {
			return 0, nil
		}
	case c == '-' || ('0' <= c && c <= '9'):
		text, err := e.sc.number()
		if err != nil {
			return 0, e.invalid(f, err)
		}
		var buf [48]byte
		if digits, ok := intText(text, &buf); ok {
			if n, err := strconv.ParseInt(bytesconv.B2S(digits), 10, 32); err == nil {
				return uint64(n), nil
			}
		}
	}
	return 0, e.invalid(f, nil)
}

// intText is protojson's reading of a number as an integer: a fraction
// or exponent is allowed when the value is whole ("1.0", "1e2"). It
// writes the decimal digits into buf.
func intText(text []byte, buf *[48]byte) ([]byte, bool) {
	s := text
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var intp, frac, exp []byte
	if s[0] != '0' {
		n := 0
		for n < len(s) && '0' <= s[n] && s[n] <= '9' {
			n++
		}
		intp = s[:n]
		s = s[n:]
	} else {
		s = s[1:]
	}
	if len(s) >= 2 && s[0] == '.' {
		n := 1
		for n < len(s) && '0' <= s[n] && s[n] <= '9' {
			n++
		}
		frac = s[1:n]
		s = s[n:]
	}
	if len(s) >= 1 && (s[0] == 'e' || s[0] == 'E') {
		exp = s[1:]
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	if len(intp) == 0 && len(frac) == 0 {
		return append(buf[:0], '0'), true
	}
	e := 0
	if len(exp) > 0 {
		v, err := strconv.ParseInt(bytesconv.B2S(exp), 10, 32)
		if err != nil {
			return nil, false
		}
		e = int(v)
	}
	out := buf[:0]
	if neg {
		out = append(out, '-')
	}
	if e >= 0 {
		if len(frac) > e || len(intp)+e > 20 {
			return nil, false
		}
		out = append(out, intp...)
		out = append(out, frac...)
		for range e - len(frac) {
			out = append(out, '0')
		}
		return out, true
	}
	if len(frac) > 0 {
		return nil, false
	}
	idx := len(intp) + e
	if idx < 0 || idx > 40 {
		return nil, false
	}
	for _, c := range intp[idx:] {
		if c != '0' {
			return nil, false
		}
	}
	return append(out, intp[:idx]...), true
}

// bitset is a set of small integers, on the stack for up to 128.
type bitset struct {
	small [2]uint64
	large []uint64
}

func (b *bitset) init(n int) {
	if n > 128 {
		b.large = make([]uint64, (n+63)/64)
	}
}

func (b *bitset) testAndSet(i int) bool {
	words := b.small[:]
	if b.large != nil {
		words = b.large
	}
	w, m := i/64, uint64(1)<<(i%64)
	had := words[w]&m != 0
	words[w] |= m
	return had
}
