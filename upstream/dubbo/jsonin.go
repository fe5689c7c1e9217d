package dubbo

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// From JSON to Hessian: a parameter's Java type decides how its value is
// written. Scalars (String, the numbers, boolean) are written as that
// type; anything else (a POJO, Map, List, Object) is written from the
// JSON's own shape: objects as maps, arrays as lists, numbers as int,
// long or double by their value. A POJO type names the class the
// provider realizes the map into, as the "class" entry Dubbo's generic
// invocation reads.

// MaxJSONDepth bounds how deeply a JSON value converted to Hessian may
// nest.
const MaxJSONDepth = 64

// kind is how a Java parameter type is written.
type kind uint8

const (
	kindObject kind = iota // a POJO, collection or Object: from the JSON's shape
	kindString
	kindInt
	kindLong
	kindDouble
	kindBool
)

// Param is one parameter of a generic call: its Java type and how to
// write it.
type Param struct {
	Type      string // java.lang.String, long, com.shop.OrderQuery
	kind      kind
	primitive bool   // int, long...: null is not a value
	class     string // the POJO class to name, "" for none
}

// NewParam classifies a Java parameter type.
func NewParam(javaType string) (Param, error) {
	p := Param{Type: javaType}
	switch javaType {
	case "":
		return p, errors.New("a parameter needs its Java type")
	case "java.lang.String", "char", "java.lang.Character":
		p.kind = kindString
	case "int", "short", "byte", "java.lang.Integer", "java.lang.Short", "java.lang.Byte":
		p.kind = kindInt
	case "long", "java.lang.Long":
		p.kind = kindLong
	case "double", "float", "java.lang.Double", "java.lang.Float":
		p.kind = kindDouble
	case "boolean", "java.lang.Boolean":
		p.kind = kindBool
	case "java.lang.Object", "java.util.Map", "java.util.HashMap", "java.util.List", "java.util.ArrayList",
		"java.util.Collection", "java.util.Set", "java.math.BigDecimal":
		p.kind = kindObject
	default:
		p.kind = kindObject
		if javaType[0] != '[' && !isJavaType(javaType) {
			return p, fmt.Errorf("parameter type %q is not a Java type name", javaType)
		}
		if javaType[0] != '[' {
			p.class = javaType
		}
	}
	switch javaType {
	case "int", "short", "byte", "long", "double", "float", "boolean", "char":
		p.primitive = true
	}
	return p, nil
}

func isJavaType(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '$') {
			return false
		}
	}
	return true
}

// ErrBadValue is a request value that cannot be written as its
// parameter's type: the client's mistake.
var ErrBadValue = errors.New("dubbo: request value does not fit the parameter type")

func badValue(p *Param, why string) error {
	return fmt.Errorf("%w: %s %s", ErrBadValue, p.Type, why)
}

// AppendText writes a plain text value (a query parameter, a header, a
// JSON scalar already unquoted) as the parameter's type.
func (p *Param) AppendText(dst, text []byte) ([]byte, error) {
	switch p.kind {
	case kindString, kindObject:
		return appendString(dst, text), nil
	case kindInt:
		v, err := strconv.ParseInt(string(text), 10, 32)
		if err != nil {
			return dst, badValue(p, "wants a 32-bit whole number")
		}
		return appendInt(dst, int32(v)), nil
	case kindLong:
		v, err := strconv.ParseInt(string(text), 10, 64)
		if err != nil {
			return dst, badValue(p, "wants a 64-bit whole number")
		}
		return appendLong(dst, v), nil
	case kindDouble:
		v, err := strconv.ParseFloat(string(text), 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return dst, badValue(p, "wants a number")
		}
		return appendDouble(dst, v), nil
	}
	switch string(text) {
	case "true":
		return appendBool(dst, true), nil
	case "false":
		return appendBool(dst, false), nil
	}
	return dst, badValue(p, "wants true or false")
}

// AppendMissing writes an absent value: null, where the type allows it.
func (p *Param) AppendMissing(dst []byte) ([]byte, error) {
	if p.primitive {
		return dst, badValue(p, "has no value")
	}
	return appendNull(dst), nil
}

// AppendJSON writes a JSON document as the parameter's type.
func (p *Param) AppendJSON(dst, doc []byte) ([]byte, error) {
	w := jsonWriter{d: doc}
	w.skipSpace()
	if w.i >= len(doc) {
		return p.AppendMissing(dst)
	}
	c := doc[w.i]
	switch {
	case c == 'n':
		if p.primitive {
			return dst, badValue(p, "cannot be null")
		}
	case p.kind == kindString && c != '"',
		(p.kind == kindInt || p.kind == kindLong || p.kind == kindDouble) && c != '-' && (c < '0' || c > '9'),
		p.kind == kindBool && c != 't' && c != 'f':
		return dst, badValue(p, "got another JSON type")
	}
	start := len(dst)
	out, err := w.value(dst, p.class, 0)
	if err != nil {
		return dst, err
	}
	if w.skipSpace(); w.i != len(doc) {
		return dst, fmt.Errorf("%w: trailing data after the JSON value", ErrBadValue)
	}
	if c != 'n' && (p.kind == kindInt || p.kind == kindLong || p.kind == kindDouble) {
		// The value's shape chose int, long or double; the type decides.
		return p.AppendText(out[:start], w.lastNumber)
	}
	return out, nil
}

// jsonWriter walks a JSON document once, writing Hessian as it goes.
type jsonWriter struct {
	d          []byte
	i          int
	lastNumber []byte
	str        []byte // unescaped string scratch
}

var errJSON = fmt.Errorf("%w: malformed JSON", ErrBadValue)

func (w *jsonWriter) skipSpace() {
	for w.i < len(w.d) {
		switch w.d[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *jsonWriter) literal(word string) bool {
	if len(w.d)-w.i >= len(word) && string(w.d[w.i:w.i+len(word)]) == word {
		w.i += len(word)
		return true
	}
	return false
}

func (w *jsonWriter) value(dst []byte, class string, depth int) ([]byte, error) {
	if depth > MaxJSONDepth {
		return dst, fmt.Errorf("%w: JSON nests deeper than %d", ErrBadValue, MaxJSONDepth)
	}
	w.skipSpace()
	if w.i >= len(w.d) {
		return dst, errJSON
	}
	switch c := w.d[w.i]; {
	case c == '{':
		return w.object(dst, class, depth)
	case c == '[':
		return w.array(dst, depth)
	case c == '"':
		s, err := w.stringValue()
		if err != nil {
			return dst, err
		}
		return appendString(dst, s), nil
	case c == 't' && w.literal("true"):
		return appendBool(dst, true), nil
	case c == 'f' && w.literal("false"):
		return appendBool(dst, false), nil
	case c == 'n' && w.literal("null"):
		return appendNull(dst), nil
	case c == '-' || c >= '0' && c <= '9':
		return w.number(dst)
	}
	return dst, errJSON
}

func (w *jsonWriter) object(dst []byte, class string, depth int) ([]byte, error) {
	w.i++ // {
	dst = append(dst, mapStart)
	if class != "" {
		dst = appendStr(dst, "class")
		dst = appendStr(dst, class)
	}
	w.skipSpace()
	if w.i < len(w.d) && w.d[w.i] == '}' {
		w.i++
		return append(dst, endMark), nil
	}
	for {
		w.skipSpace()
		if w.i >= len(w.d) || w.d[w.i] != '"' {
			return dst, errJSON
		}
		key, err := w.stringValue()
		if err != nil {
			return dst, err
		}
		if class != "" && string(key) == "class" {
			// The type the route names wins over one the client sends.
			w.skipSpace()
			if w.i >= len(w.d) || w.d[w.i] != ':' {
				return dst, errJSON
			}
			w.i++
			if _, err = w.value(nil, "", depth+1); err != nil {
				return dst, err
			}
		} else {
			dst = appendString(dst, key)
			w.skipSpace()
			if w.i >= len(w.d) || w.d[w.i] != ':' {
				return dst, errJSON
			}
			w.i++
			if dst, err = w.value(dst, "", depth+1); err != nil {
				return dst, err
			}
		}
		switch end, err := w.separator('}'); {
		case err != nil:
			return dst, err
		case end:
			return append(dst, endMark), nil
		}
	}
}

func (w *jsonWriter) array(dst []byte, depth int) ([]byte, error) {
	w.i++ // [
	dst = append(dst, listStart)
	w.skipSpace()
	if w.i < len(w.d) && w.d[w.i] == ']' {
		w.i++
		return append(dst, endMark), nil
	}
	for {
		var err error
		if dst, err = w.value(dst, "", depth+1); err != nil {
			return dst, err
		}
		switch end, err := w.separator(']'); {
		case err != nil:
			return dst, err
		case end:
			return append(dst, endMark), nil
		}
	}
}

// separator takes what follows a member or element: a comma (more
// follow) or close (the object or array ends, end).
func (w *jsonWriter) separator(close byte) (end bool, err error) {
	w.skipSpace()
	if w.i >= len(w.d) {
		return false, errJSON
	}
	switch w.d[w.i] {
	case ',':
		w.i++
		return false, nil
	case close:
		w.i++
		return true, nil
	}
	return false, errJSON
}

// number writes a JSON number: a whole one as int or long when it fits,
// anything else as double.
func (w *jsonWriter) number(dst []byte) ([]byte, error) {
	start := w.i
	whole := true
	for w.i < len(w.d) {
		c := w.d[w.i]
		if c >= '0' && c <= '9' || c == '-' || c == '+' {
			w.i++
			continue
		}
		if c == '.' || c == 'e' || c == 'E' {
			whole = false
			w.i++
			continue
		}
		break
	}
	text := w.d[start:w.i]
	w.lastNumber = text
	if whole {
		if v, err := strconv.ParseInt(string(text), 10, 64); err == nil {
			if v >= math.MinInt32 && v <= math.MaxInt32 {
				return appendInt(dst, int32(v)), nil
			}
			return appendLong(dst, v), nil
		}
	}
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return dst, errJSON
	}
	if math.IsInf(v, 0) {
		return dst, fmt.Errorf("%w: number out of range", ErrBadValue)
	}
	return appendDouble(dst, v), nil
}

// stringValue reads a JSON string at w.i, unescaped; the bytes are valid
// until the next call.
func (w *jsonWriter) stringValue() ([]byte, error) {
	w.i++ // "
	start := w.i
	for w.i < len(w.d) {
		c := w.d[w.i]
		if c == '"' {
			s := w.d[start:w.i]
			w.i++
			return s, nil
		}
		if c == '\\' {
			return w.escapedString(start)
		}
		if c < 0x20 {
			return nil, errJSON
		}
		w.i++
	}
	return nil, errJSON
}

func (w *jsonWriter) escapedString(start int) ([]byte, error) {
	s := append(w.str[:0], w.d[start:w.i]...)
	defer func() { w.str = s[:0] }()
	for w.i < len(w.d) {
		c := w.d[w.i]
		switch {
		case c == '"':
			w.i++
			return s, nil
		case c < 0x20:
			return nil, errJSON
		case c != '\\':
			s = append(s, c)
			w.i++
			continue
		}
		if w.i+1 >= len(w.d) {
			return nil, errJSON
		}
		e := w.d[w.i+1]
		w.i += 2
		switch e {
		case '"', '\\', '/':
			s = append(s, e)
		case 'b':
			s = append(s, '\b')
		case 'f':
			s = append(s, '\f')
		case 'n':
			s = append(s, '\n')
		case 'r':
			s = append(s, '\r')
		case 't':
			s = append(s, '\t')
		case 'u':
			r, ok := w.hex4()
			if !ok {
				return nil, errJSON
			}
			if utf16.IsSurrogate(r) && w.i+1 < len(w.d) && w.d[w.i] == '\\' && w.d[w.i+1] == 'u' {
				w.i += 2
				r2, ok := w.hex4()
				if !ok {
					return nil, errJSON
				}
				r = utf16.DecodeRune(r, r2)
			}
			s = utf8.AppendRune(s, r)
		default:
			return nil, errJSON
		}
	}
	return nil, errJSON
}

func (w *jsonWriter) hex4() (rune, bool) {
	if w.i+4 > len(w.d) {
		return 0, false
	}
	var r rune
	for _, c := range w.d[w.i : w.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	w.i += 4
	return r, true
}
