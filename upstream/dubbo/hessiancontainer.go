package dubbo

import (
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/internal/jsonstr"
)

// open enters a list, map or object: it takes the next reference number
// and checks the nesting.
func (r *decoder) open(c byte) (int, error) {
	if r.depth >= MaxDepth {
		return 0, errTooDeep
	}
	if len(r.refs) >= maxRefs {
		return 0, errTooBig
	}
	r.depth++
	r.refs = append(r.refs, span{start: len(r.out), end: -1})
	r.out = append(r.out, c)
	return len(r.refs) - 1, nil
}

func (r *decoder) close(ref int, c byte) error {
	r.depth--
	r.out = append(r.out, c)
	r.refs[ref].end = len(r.out)
	return r.grown()
}

// comma separates elements after the first.
func (r *decoder) comma(n int) {
	if n > 0 {
		r.out = append(r.out, ',')
	}
}

func (r *decoder) list(tag byte) error {
	n := -1 // variable length: up to 'Z'
	var err error
	switch {
	case tag == 'U':
		_, err = r.readType()
	case tag == 'V':
		if _, err = r.readType(); err == nil {
			n, err = r.readInt()
		}
	case tag == 0x58:
		n, err = r.readInt()
	case tag >= 0x70 && tag <= 0x77:
		_, err = r.readType()
		n = int(tag - 0x70)
	case tag >= 0x78:
		n = int(tag - 0x78)
	}
	if err != nil {
		return err
	}
	if n < -1 || n < 0 && tag != 'U' && tag != 0x57 {
		return errors.New("dubbo: hessian list of negative length")
	}
	ref, err := r.open('[')
	if err != nil {
		return err
	}
	// A declared length is only a promise: elements are read one by one,
	// each at least a byte, so a false length ends at the body's end.
	for k := 0; n < 0 || k < n; k++ {
		if n < 0 {
			if r.i >= len(r.d) {
				return errTruncated
			}
			if r.d[r.i] == 'Z' {
				r.i++
				break
			}
		}
		r.comma(k)
		if err := r.value(); err != nil {
			return err
		}
	}
	return r.close(ref, ']')
}

func (r *decoder) hmap(tag byte) error {
	typ := ""
	if tag == 'M' {
		var err error
		if typ, err = r.readType(); err != nil {
			return err
		}
	}
	if r.depth == 0 && r.topClass == "" {
		r.topClass = typ
	}
	ref, err := r.open('{')
	if err != nil {
		return err
	}
	for k := 0; ; k++ {
		if r.i >= len(r.d) {
			return errTruncated
		}
		if r.d[r.i] == 'Z' {
			r.i++
			break
		}
		r.comma(k)
		if err := r.key(); err != nil {
			return err
		}
		r.out = append(r.out, ':')
		if err := r.value(); err != nil {
			return err
		}
	}
	return r.close(ref, '}')
}

// key writes a map key as a JSON string: a string as it is, a number,
// boolean or null as its text in quotes; a container cannot be a key.
func (r *decoder) key() error {
	start := len(r.out)
	if err := r.value(); err != nil {
		return err
	}
	switch r.out[start] {
	case '"':
		return nil
	case '{', '[':
		return errors.New("dubbo: hessian map key is a container; JSON keys are strings")
	}
	r.out = append(r.out, 0)
	copy(r.out[start+1:], r.out[start:len(r.out)-1])
	r.out[start] = '"'
	r.out = append(r.out, '"')
	return nil
}

func (r *decoder) classDef() error {
	tag, err := r.byte()
	if err != nil {
		return err
	}
	name, err := r.plainString(tag)
	if err != nil {
		return err
	}
	n, err := r.readInt()
	if err != nil {
		return err
	}
	if n < 0 || n > maxFields {
		return fmt.Errorf("dubbo: hessian class %s declares %d fields", name, n)
	}
	if len(r.classes) >= maxClasses {
		return errTooBig
	}
	def := classDef{name: name, fields: make([]string, 0, min(n, len(r.d)-r.i))}
	for range n {
		tag, err := r.byte()
		if err != nil {
			return err
		}
		f, err := r.plainString(tag)
		if err != nil {
			return err
		}
		def.fields = append(def.fields, f)
	}
	r.classes = append(r.classes, def)
	return nil
}

// object writes an instance as a JSON object of its fields.
func (r *decoder) object(tag byte) error {
	idx := int(tag) - 0x60
	if tag == 'O' {
		var err error
		if idx, err = r.readInt(); err != nil {
			return err
		}
	}
	if idx < 0 || idx >= len(r.classes) {
		return fmt.Errorf("dubbo: hessian object of undefined class %d", idx)
	}
	def := &r.classes[idx]
	top := r.depth == 0 && r.topClass == ""
	if top {
		r.topClass = def.name
	}
	ref, err := r.open('{')
	if err != nil {
		return err
	}
	for k, f := range def.fields {
		r.comma(k)
		r.out = jsonstr.AppendString(r.out, f)
		r.out = append(r.out, ':')
		start := len(r.out)
		if err := r.value(); err != nil {
			return err
		}
		if top && f == "detailMessage" {
			r.message = span{start, len(r.out)}
		}
	}
	return r.close(ref, '}')
}

// ref writes again a container written before.
func (r *decoder) ref() error {
	n, err := r.readInt()
	if err != nil {
		return err
	}
	if n < 0 || n >= len(r.refs) {
		return fmt.Errorf("dubbo: hessian reference %d out of range", n)
	}
	s := r.refs[n]
	if s.end < 0 {
		return errCycle
	}
	if len(r.out)+s.end-s.start > r.maxOut {
		return errTooBig
	}
	r.out = append(r.out, r.out[s.start:s.end]...)
	return nil
}
