package transcode

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/bytesconv"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The google.protobuf types protojson gives a JSON form of their own,
// read from JSON into wire bytes. Their field numbers are fixed by
// google/protobuf/*.proto.

const (
	maxDurationSeconds  = 315576000000
	maxTimestampSeconds = 253402300799
	minTimestampSeconds = -62135596800
)

func (e *wireEncoder) wellKnown(mp *messagePlan) error {
	switch mp.wk {
	case wkWrapper:
		return e.value(&mp.fields[0], 1, true)
	case wkStruct:
		return e.mapField(&mp.fields[0])
	case wkListValue:
		return e.listField(&mp.fields[0])
	case wkValue:
		return e.knownValue(mp)
	case wkTimestamp:
		return e.timestamp()
	case wkDuration:
		return e.duration()
	case wkFieldMask:
		return e.fieldMask()
	}
	return fmt.Errorf("%s: no JSON form", mp.fullName)
}

// knownValue reads any JSON value as a google.protobuf.Value: null 1,
// number 2, string 3, bool 4, object 5, array 6.
func (e *wireEncoder) knownValue(mp *messagePlan) error {
	switch c := e.sc.peek(); {
	case c == 'n' && e.sc.literal("null"):
		e.out = protowire.AppendTag(e.out, 1, protowire.VarintType)
		e.out = append(e.out, 0)
	case c == 't' || c == 'f':
		v := e.sc.literal("true")
		if !v && !e.sc.literal("false") {
			return errors.New("invalid google.protobuf.Value")
		}
		e.out = protowire.AppendTag(e.out, 4, protowire.VarintType)
		e.out = protowire.AppendVarint(e.out, protowire.EncodeBool(v))
	case c == '-' || ('0' <= c && c <= '9'):
		text, err := e.sc.number()
		if err != nil {
			return err
		}
		v, err := strconv.ParseFloat(bytesconv.B2S(text), 64)
		if err != nil {
			return fmt.Errorf("invalid google.protobuf.Value: %s", text)
		}
		e.out = protowire.AppendTag(e.out, 2, protowire.Fixed64Type)
		e.out = protowire.AppendFixed64(e.out, math.Float64bits(v))
	case c == '"':
		return e.value(mp.field(3), 3, false)
	case c == '{':
		return e.value(mp.field(5), 5, false)
	case c == '[':
		return e.value(mp.field(6), 6, false)
	default:
		return errors.New("invalid google.protobuf.Value")
	}
	return nil
}

// secondsAndNanos writes the fields of a Timestamp or a Duration, zeros
// left out.
func (e *wireEncoder) secondsAndNanos(secs int64, nanos int32) {
	if secs != 0 {
		e.out = protowire.AppendTag(e.out, 1, protowire.VarintType)
		e.out = protowire.AppendVarint(e.out, uint64(secs))
	}
	if nanos != 0 {
		e.out = protowire.AppendTag(e.out, 2, protowire.VarintType)
		e.out = protowire.AppendVarint(e.out, uint64(int64(nanos)))
	}
}

func (e *wireEncoder) timestamp() error {
	s, err := e.sc.str()
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, bytesconv.B2S(s))
	if err != nil {
		return fmt.Errorf("invalid google.protobuf.Timestamp value %q", s)
	}
	secs := t.Unix()
	if secs < minTimestampSeconds || secs > maxTimestampSeconds {
		return fmt.Errorf("google.protobuf.Timestamp value out of range: %q", s)
	}
	// At most nine digits of a fraction, as protojson allows.
	i := bytes.LastIndexByte(s, '.')
	j := bytes.LastIndexAny(s, "Z-+")
	if i >= 0 && j >= i && j-i > len(".999999999") {
		return fmt.Errorf("invalid google.protobuf.Timestamp value %q", s)
	}
	e.secondsAndNanos(secs, int32(t.Nanosecond()))
	return nil
}

func (e *wireEncoder) duration() error {
	s, err := e.sc.str()
	if err != nil {
		return err
	}
	secs, nanos, ok := parseDuration(s)
	if !ok {
		return fmt.Errorf("invalid google.protobuf.Duration value %q", s)
	}
	if secs < -maxDurationSeconds || secs > maxDurationSeconds {
		return fmt.Errorf("google.protobuf.Duration value out of range: %q", s)
	}
	e.secondsAndNanos(secs, nanos)
	return nil
}

// parseDuration reads "[-+]<seconds>[.<up to nine digits>]s".
func parseDuration(b []byte) (int64, int32, bool) {
	if len(b) < 2 || b[len(b)-1] != 's' {
		return 0, 0, false
	}
	b = b[:len(b)-1]
	neg := false
	switch b[0] {
	case '-':
		neg, b = true, b[1:]
	case '+':
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, 0, false
	}
	var intp []byte
	switch {
	case b[0] == '0':
		b = b[1:]
	case '1' <= b[0] && b[0] <= '9':
		n := 1
		for n < len(b) && '0' <= b[n] && b[n] <= '9' {
			n++
		}
		intp, b = b[:n], b[n:]
	case b[0] == '.':
	default:
		return 0, 0, false
	}
	var nanos int64
	if len(b) > 0 {
		if b[0] != '.' {
			return 0, 0, false
		}
		b = b[1:]
		n := 0
		for len(b) > 0 && n < 9 && '0' <= b[0] && b[0] <= '9' {
			nanos = nanos*10 + int64(b[0]-'0')
			n++
			b = b[1:]
		}
		if len(b) > 0 {
			return 0, 0, false
		}
		for ; n < 9; n++ {
			nanos *= 10
		}
	}
	var secs int64
	if len(intp) > 0 {
		var err error
		if secs, err = strconv.ParseInt(bytesconv.B2S(intp), 10, 64); err != nil {
			return 0, 0, false
		}
	}
	if neg {
		secs, nanos = -secs, -nanos
	}
	return secs, int32(nanos), true
}

// fieldMask reads "a.bC,d" as the paths "a.b_c" and "d".
func (e *wireEncoder) fieldMask() error {
	s, err := e.sc.str()
	if err != nil {
		return err
	}
	s = bytes.TrimSpace(s)
	for len(s) > 0 {
		path := s
		if i := bytes.IndexByte(s, ','); i >= 0 {
			path, s = s[:i], s[i+1:]
			if len(s) == 0 {
				return errors.New("google.protobuf.FieldMask: an empty path")
			}
		} else {
			s = nil
		}
		e.out = protowire.AppendTag(e.out, 1, protowire.BytesType)
		at := e.beginLen()
		for _, c := range path {
			if c == '_' {
				return fmt.Errorf("google.protobuf.FieldMask contains invalid path: %q", path)
			}
			if 'A' <= c && c <= 'Z' {
				e.out = append(e.out, '_', c+'a'-'A')
			} else {
				e.out = append(e.out, c)
			}
		}
		if !protoreflect.FullName(bytesconv.B2S(e.out[at:])).IsValid() {
			return fmt.Errorf("google.protobuf.FieldMask contains invalid path: %q", path)
		}
		e.endLen(at)
	}
	return nil
}
