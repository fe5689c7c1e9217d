package pipeline

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
)

// Digest returns a digest of settings as decoded: every exported field of
// every struct it holds, followed through pointers, slices, arrays, maps
// (in the order of their keys) and interfaces. It is what keys
// reload-surviving state (State.Get): a setting added to a struct later is
// in the digest without anyone listing it, so changing it can never leave
// an object built with the old value in place. A field that shapes no
// state (where it was written, a refusal's status) is left out only by
// saying so, with the tag `digest:"-"`.
//
// It is for load time: it walks by reflection. Values of kinds that are
// not settings (funcs, channels, unsafe pointers) are a programming
// error, and it panics on them.
func Digest(settings any) string {
	d := digester{}
	d.value(reflect.ValueOf(settings))
	sum := sha256.Sum256(d.buf)
	return hex.EncodeToString(sum[:12])
}

type digester struct {
	buf []byte
}

func (d *digester) tag(b byte) { d.buf = append(d.buf, b) }

func (d *digester) uint(u uint64) { d.buf = binary.LittleEndian.AppendUint64(d.buf, u) }

func (d *digester) str(s string) {
	d.uint(uint64(len(s)))
	d.buf = append(d.buf, s...)
}

func (d *digester) value(v reflect.Value) {
	if !v.IsValid() {
		d.tag('0')
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		d.tag('b')
		if v.Bool() {
			d.tag(1)
		} else {
			d.tag(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		d.tag('i')
		d.uint(uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		d.tag('u')
		d.uint(v.Uint())
	case reflect.Float32, reflect.Float64:
		d.tag('f')
		d.uint(math.Float64bits(v.Float()))
	case reflect.Complex64, reflect.Complex128:
		d.tag('c')
		d.uint(math.Float64bits(real(v.Complex())))
		d.uint(math.Float64bits(imag(v.Complex())))
	case reflect.String:
		d.tag('s')
		d.str(v.String())
	case reflect.Pointer:
		if v.IsNil() {
			d.tag('n')
			return
		}
		d.tag('p')
		d.value(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			d.tag('n')
			return
		}
		d.tag('e')
		d.str(v.Elem().Type().String())
		d.value(v.Elem())
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			d.tag('n')
			return
		}
		d.tag('l')
		d.uint(uint64(v.Len()))
		for i := range v.Len() {
			d.value(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			d.tag('n')
			return
		}
		d.tag('m')
		d.uint(uint64(v.Len()))
		type entry struct{ key, val []byte }
		entries := make([]entry, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			k, e := digester{}, digester{}
			k.value(it.Key())
			e.value(it.Value())
			entries = append(entries, entry{k.buf, e.buf})
		}
		slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(string(a.key), string(b.key)) })
		for _, e := range entries {
			d.buf = append(d.buf, e.key...)
			d.buf = append(d.buf, e.val...)
		}
	case reflect.Struct:
		t := v.Type()
		d.tag('{')
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("digest") == "-" {
				continue
			}
			d.str(f.Name)
			d.value(v.Field(i))
		}
		d.tag('}')
	default:
		panic(fmt.Sprintf("pipeline.Digest: %s is not a setting", v.Type()))
	}
}
