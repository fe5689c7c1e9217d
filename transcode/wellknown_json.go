package transcode

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/bytesconv"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The google.protobuf types protojson writes in a form of their own,
// from wire bytes to JSON; what protojson refuses to write (a Timestamp
// out of range, a Value without a kind) is refused too.

func (w *jsonWriter) wellKnown(mp *messagePlan, b []byte) error {
	switch mp.wk {
	case wkWrapper:
		return w.lastScalar(&mp.fields[0], b)
	case wkStruct, wkListValue:
		f := &mp.fields[0]
		base := w.index(mp, b)
		s := w.spans[base]
		w.spans = w.spans[:base]
		var err error
		if f.isMap {
			_, err = w.mapValue(f, b, s, s.first)
		} else {
			_, err = w.list(f, b, s, s.first)
		}
		return err
	case wkValue:
		return w.knownValue(mp, b)
	case wkTimestamp, wkDuration:
		secs, _ := lastBits(mp.field(1), b)
		nanos, _ := lastBits(mp.field(2), b)
		if mp.wk == wkTimestamp {
			return w.timestamp(int64(secs), int64(int32(nanos)))
		}
		return w.duration(int64(secs), int64(int32(nanos)))
	case wkFieldMask:
		return w.fieldMask(&mp.fields[0], b)
	}
	return fmt.Errorf("%s: no JSON form", mp.fullName)
}

func lastBits(f *fieldPlan, b []byte) (uint64, bool) {
	typ, at, ok := lastOf(f, b)
	if !ok {
		return 0, false
	}
	v, _ := readValue(typ, b[at:])
	return v, true
}

func (w *jsonWriter) lastScalar(f *fieldPlan, b []byte) error {
	typ, at, ok := lastOf(f, b)
	if !ok {
		return w.scalar(f, 0, []byte{})
	}
	v, str := readValue(typ, b[at:])
	return w.scalar(f, v, str)
}

// knownValue writes a google.protobuf.Value: the member of its oneof set
// last.
func (w *jsonWriter) knownValue(mp *messagePlan, b []byte) error {
	base := w.index(mp, b)
	defer func() { w.spans = w.spans[:base] }()
	win := -1
	for i := range mp.fields {
		if s := w.spans[base+i]; s.count > 0 && (win < 0 || s.last > w.spans[base+win].last) {
			win = i
		}
	}
	if win < 0 {
		return errors.New("google.protobuf.Value: none of the oneof fields is set")
	}
	f := &mp.fields[win]
	s := w.spans[base+win]
	if f.kind == protoreflect.DoubleKind {
		typ, at, _ := (&fieldIter{b: b, pos: s.last, f: f}).next()
		v, _ := readValue(typ, b[at:])
		if x := math.Float64frombits(v); math.IsNaN(x) || math.IsInf(x, 0) {
			return errors.New("google.protobuf.Value: a number that JSON cannot hold")
		}
	}
	cut, _ := w.oneofCut(mp, base, win)
	_, err := w.field(f, b, s, max(cut, s.first))
	return err
}

func (w *jsonWriter) timestamp(secs, nanos int64) error {
	if secs < minTimestampSeconds || secs > maxTimestampSeconds {
		return fmt.Errorf("google.protobuf.Timestamp: seconds out of range %d", secs)
	}
	if nanos < 0 || nanos > 999999999 {
		return fmt.Errorf("google.protobuf.Timestamp: nanos out of range %d", nanos)
	}
	w.out = append(w.out, '"')
	w.out = time.Unix(secs, nanos).UTC().AppendFormat(w.out, "2006-01-02T15:04:05.000000000")
	w.trimFraction()
	w.out = append(w.out, 'Z', '"')
	return nil
}

// trimFraction shortens a nine-digit fraction to six, three or none, as
// protojson writes it.
func (w *jsonWriter) trimFraction() {
	for range 2 {
		if bytes.HasSuffix(w.out, []byte("000")) {
			w.out = w.out[:len(w.out)-3]
		}
	}
	if bytes.HasSuffix(w.out, []byte(".000")) {
		w.out = w.out[:len(w.out)-4]
	}
}

func (w *jsonWriter) duration(secs, nanos int64) error {
	if secs < -maxDurationSeconds || secs > maxDurationSeconds {
		return fmt.Errorf("google.protobuf.Duration: seconds out of range %d", secs)
	}
	if nanos < -999999999 || nanos > 999999999 {
		return fmt.Errorf("google.protobuf.Duration: nanos out of range %d", nanos)
	}
	if (secs > 0 && nanos < 0) || (secs < 0 && nanos > 0) {
		return errors.New("google.protobuf.Duration: signs of seconds and nanos do not match")
	}
	w.out = append(w.out, '"')
	if secs < 0 || nanos < 0 {
		w.out = append(w.out, '-')
		secs, nanos = -secs, -nanos
	}
	w.out = strconv.AppendInt(w.out, secs, 10)
	w.out = append(w.out, '.')
	var digits [9]byte
	for i := 8; i >= 0; i-- {
		digits[i] = byte('0' + nanos%10)
		nanos /= 10
	}
	w.out = append(w.out, digits[:]...)
	w.trimFraction()
	w.out = append(w.out, 's', '"')
	return nil
}

// fieldMask writes the paths lowerCamelCased and joined with commas; a
// path that would not come back the same is refused, as protojson does.
func (w *jsonWriter) fieldMask(f *fieldPlan, b []byte) error {
	w.out = append(w.out, '"')
	it := fieldIter{b: b, f: f}
	n := 0
	for typ, at, ok := it.next(); ok; typ, at, ok = it.next() {
		_, path := readValue(typ, b[at:])
		if !protoreflect.FullName(bytesconv.B2S(path)).IsValid() {
			return fmt.Errorf("google.protobuf.FieldMask contains invalid path: %q", path)
		}
		if n > 0 {
			w.out = append(w.out, ',')
		}
		n++
		start := len(w.out)
		underscore := false
		for _, c := range path {
			if c == '_' {
				underscore = true
				continue
			}
			if underscore && 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			underscore = false
			w.out = append(w.out, c)
		}
		if !snakeOf(w.out[start:], path) {
			return fmt.Errorf("google.protobuf.FieldMask contains irreversible value %q", path)
		}
	}
	w.out = append(w.out, '"')
	return nil
}

// snakeOf reports whether camel snake-cased is path.
func snakeOf(camel, path []byte) bool {
	i := 0
	for _, c := range camel {
		if 'A' <= c && c <= 'Z' {
			if i+1 >= len(path) || path[i] != '_' || path[i+1] != c+'a'-'A' {
				return false
			}
			i += 2
			continue
		}
		if i >= len(path) || path[i] != c {
			return false
		}
		i++
	}
	return i == len(path)
}
