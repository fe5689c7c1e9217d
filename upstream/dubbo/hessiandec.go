package dubbo

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// From Hessian to JSON: a provider's answer is written out as JSON as it
// is read, without a value tree. The provider is not trusted: besides the
// frame's length limit, nesting, class definitions, references and the
// JSON written are bounded, and a reference back into an unfinished
// container (a cycle, which JSON cannot express) is refused.

// Limits on what one answer may hold.
const (
	MaxDepth      = 64      // nesting of lists, maps and objects
	maxClasses    = 4096    // class definitions
	maxFields     = 1024    // fields of one class
	maxRefs       = 1 << 16 // containers one answer may refer back to
	maxTypes      = 4096    // type names
	outputPerBody = 8       // JSON written per byte read, at most (references repeat what they point at)
)

var (
	errTruncated = errors.New("dubbo: hessian value cut short")
	errTooDeep   = fmt.Errorf("dubbo: hessian value nests deeper than %d", MaxDepth)
	errTooBig    = errors.New("dubbo: hessian value expands past its limit")
	errCycle     = errors.New("dubbo: hessian value refers to itself; JSON cannot express it")
)

type classDef struct {
	name   string
	fields []string
}

type span struct{ start, end int } // end < 0: still open

// decoder reads Hessian values from d and appends their JSON to out.
type decoder struct {
	d       []byte
	i       int
	out     []byte
	maxOut  int
	depth   int
	classes []classDef
	types   []string
	refs    []span

	// topClass is the class of the outermost object or typed map, and
	// message its detailMessage field's JSON, for exceptions.
	topClass string
	message  span
}

func newDecoder(d, out []byte) decoder {
	return decoder{d: d, out: out, maxOut: len(out) + outputPerBody*len(d) + 64}
}

func (r *decoder) byte() (byte, error) {
	if r.i >= len(r.d) {
		return 0, errTruncated
	}
	b := r.d[r.i]
	r.i++
	return b, nil
}

func (r *decoder) take(n int) ([]byte, error) {
	if n < 0 || len(r.d)-r.i < n {
		return nil, errTruncated
	}
	b := r.d[r.i : r.i+n]
	r.i += n
	return b, nil
}

func (r *decoder) grown() error {
	if len(r.out) > r.maxOut {
		return errTooBig
	}
	return nil
}

// value reads one value and writes its JSON.
func (r *decoder) value() error {
	tag, err := r.byte()
	if err != nil {
		return err
	}
	return r.tagged(tag)
}

func (r *decoder) tagged(tag byte) error {
	switch {
	case tag == 'N':
		r.out = append(r.out, "null"...)
	case tag == 'T':
		r.out = append(r.out, "true"...)
	case tag == 'F':
		r.out = append(r.out, "false"...)
	case tag >= 0x80 && tag <= 0xbf, tag >= 0xc0 && tag <= 0xd7, tag == 'I',
		tag >= 0xd8 && tag <= 0xff, tag >= 0x38 && tag <= 0x3f, tag == 0x59, tag == 'L':
		v, err := r.integer(tag)
		if err != nil {
			return err
		}
		r.out = strconv.AppendInt(r.out, v, 10)
	case tag >= 0x5b && tag <= 0x5f, tag == 'D':
		return r.double(tag)
	case tag == 0x4a, tag == 0x4b:
		return r.date(tag)
	case tag <= 0x1f, tag >= 0x30 && tag <= 0x33, tag == 'R', tag == 'S':
		return r.stringJSON(tag)
	case tag >= 0x20 && tag <= 0x2f, tag >= 0x34 && tag <= 0x37, tag == 'A', tag == 'B':
		return r.binary(tag)
	case tag == 'U', tag == 'V', tag == 0x57, tag == 0x58, tag >= 0x70 && tag <= 0x7f:
		return r.list(tag)
	case tag == 'M', tag == 'H':
		return r.hmap(tag)
	case tag == 'C':
		if err := r.classDef(); err != nil {
			return err
		}
		return r.value()
	case tag == 'O', tag >= 0x60 && tag <= 0x6f:
		return r.object(tag)
	case tag == 'Q':
		return r.ref()
	default:
		return fmt.Errorf("dubbo: unknown hessian tag 0x%02x", tag)
	}
	return r.grown()
}

// integer reads an int or a long whose tag was read.
func (r *decoder) integer(tag byte) (int64, error) {
	var n int
	switch {
	case tag >= 0x80 && tag <= 0xbf:
		return int64(tag) - 0x90, nil
	case tag >= 0xd8 && tag <= 0xef:
		return int64(tag) - 0xe0, nil
	case tag >= 0xc0 && tag <= 0xcf, tag >= 0xf0: // 0xf0-0xff
		n = 1
	case tag >= 0xd0 && tag <= 0xd7, tag >= 0x38 && tag <= 0x3f:
		n = 2
	case tag == 'I', tag == 0x59:
		b, err := r.take(4)
		if err != nil {
			return 0, err
		}
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	case tag == 'L':
		b, err := r.take(8)
		if err != nil {
			return 0, err
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	default:
		return 0, fmt.Errorf("dubbo: expected an integer, found tag 0x%02x", tag)
	}
	b, err := r.take(n)
	if err != nil {
		return 0, err
	}
	var base int64
	switch {
	case tag >= 0xc0 && tag <= 0xcf:
		base = int64(tag) - 0xc8
	case tag >= 0xf0:
		base = int64(tag) - 0xf8
	case tag >= 0xd0 && tag <= 0xd7:
		base = int64(tag) - 0xd4
	default:
		base = int64(tag) - 0x3c
	}
	for _, c := range b {
		base = base<<8 | int64(c)
	}
	return base, nil
}

// readInt reads an int value (a length, a class index, a reference).
func (r *decoder) readInt() (int, error) {
	tag, err := r.byte()
	if err != nil {
		return 0, err
	}
	v, err := r.integer(tag)
	return int(v), err
}

func (r *decoder) double(tag byte) error {
	var v float64
	switch tag {
	case 0x5b:
		v = 0
	case 0x5c:
		v = 1
	case 0x5d:
		b, err := r.take(1)
		if err != nil {
			return err
		}
		v = float64(int8(b[0]))
	case 0x5e:
		b, err := r.take(2)
		if err != nil {
			return err
		}
		v = float64(int16(binary.BigEndian.Uint16(b)))
	case 0x5f: // a double held as thousandths in 32 bits
		b, err := r.take(4)
		if err != nil {
			return err
		}
		v = float64(int32(binary.BigEndian.Uint32(b))) / 1000
	default:
		b, err := r.take(8)
		if err != nil {
			return err
		}
		v = math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		r.out = append(r.out, "null"...) // JSON has no such numbers
		return nil
	}
	r.out = strconv.AppendFloat(r.out, v, 'g', -1, 64)
	return nil
}

// date writes a date as RFC 3339 in UTC, to the millisecond.
func (r *decoder) date(tag byte) error {
	var t time.Time
	if tag == 0x4a {
		b, err := r.take(8)
		if err != nil {
			return err
		}
		t = time.UnixMilli(int64(binary.BigEndian.Uint64(b)))
	} else {
		b, err := r.take(4)
		if err != nil {
			return err
		}
		t = time.Unix(int64(int32(binary.BigEndian.Uint32(b)))*60, 0)
	}
	r.out = append(r.out, '"')
	r.out = t.UTC().AppendFormat(r.out, "2006-01-02T15:04:05.000Z07:00")
	r.out = append(r.out, '"')
	return nil
}

func (r *decoder) binary(tag byte) error {
	r.out = append(r.out, '"')
	enc := base64.StdEncoding
	var pending []byte // base64 needs whole groups of 3 across chunks
	for {
		var n int
		final := true
		switch {
		case tag >= 0x20 && tag <= 0x2f:
			n = int(tag - 0x20)
		case tag >= 0x34 && tag <= 0x37:
			b, err := r.take(1)
			if err != nil {
				return err
			}
			n = int(tag-0x34)<<8 | int(b[0])
		case tag == 'A' || tag == 'B':
			b, err := r.take(2)
			if err != nil {
				return err
			}
			n = int(binary.BigEndian.Uint16(b))
			final = tag == 'B'
		default:
			return fmt.Errorf("dubbo: expected binary, found tag 0x%02x", tag)
		}
		b, err := r.take(n)
		if err != nil {
			return err
		}
		pending = append(pending, b...)
		whole := len(pending) / 3 * 3
		if final {
			whole = len(pending)
		}
		r.out = enc.AppendEncode(r.out, pending[:whole])
		pending = append(pending[:0], pending[whole:]...)
		if err := r.grown(); err != nil {
			return err
		}
		if final {
			r.out = append(r.out, '"')
			return nil
		}
		if tag, err = r.byte(); err != nil {
			return err
		}
	}
}

// readType reads a list's or a typed map's type: a name, or the index of
// one seen before.
func (r *decoder) readType() (string, error) {
	if r.i >= len(r.d) {
		return "", errTruncated
	}
	if isStringTag(r.d[r.i]) {
		tag, _ := r.byte()
		s, err := r.plainString(tag)
		if err != nil {
			return "", err
		}
		if len(r.types) >= maxTypes {
			return "", errTooBig
		}
		r.types = append(r.types, s)
		return s, nil
	}
	n, err := r.readInt()
	if err != nil {
		return "", err
	}
	if n < 0 || n >= len(r.types) {
		return "", fmt.Errorf("dubbo: hessian type reference %d out of range", n)
	}
	return r.types[n], nil
}

func isStringTag(tag byte) bool {
	return tag <= 0x1f || tag >= 0x30 && tag <= 0x33 || tag == 'R' || tag == 'S'
}
