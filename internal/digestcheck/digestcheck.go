// Package digestcheck is for tests of settings that key reload-surviving
// state by a digest (pipeline.Digest): it changes every field of a
// settings value, one at a time, and reports each change the digest does
// not see, so a field added later without digest coverage fails its
// package's test.
package digestcheck

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// EveryField changes each field of settings (a struct, or a pointer to
// one), recursively, one at a time, and fails t for each change that
// leaves digest(settings) as it was. Fields tagged `digest:"-"` and
// unexported ones are skipped: they are left out on purpose. settings
// itself is left unchanged.
func EveryField(t testing.TB, settings any, digest func(any) string) {
	t.Helper()
	base := digest(settings)
	root := reflect.ValueOf(settings)
	var paths []string
	collect(root.Type(), "", &paths, map[reflect.Type]bool{})
	if len(paths) == 0 {
		t.Fatalf("%T has no field to change", settings)
	}
	for _, path := range paths {
		c := deepCopy(root)
		change(c, strings.Split(path, ".")[1:])
		if digest(c.Interface()) == base {
			t.Errorf("%T: changing %s leaves the digest as it was", settings, path)
		}
	}
	if digest(settings) != base {
		t.Fatalf("%T: the check changed the value it was given", settings)
	}
}

// collect lists the paths of the fields under t: ".A.B" for field B of
// struct field A. A field of a type already on the way (a recursive type)
// is a leaf.
func collect(t reflect.Type, path string, out *[]string, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		*out = append(*out, path)
		return
	}
	if t.NumField() == 0 {
		return
	}
	seen[t] = true
	defer delete(seen, t)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Tag.Get("digest") == "-" {
			continue
		}
		collect(f.Type, path+"."+f.Name, out, seen)
	}
}

// change alters the field at path under v, allocating nil pointers on
// the way.
func change(v reflect.Value, path []string) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	if len(path) > 0 {
		change(v.FieldByName(path[0]), path[1:])
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for it := v.MapRange(); it.Next(); {
			m.SetMapIndex(it.Key(), it.Value())
		}
		k := reflect.New(v.Type().Key()).Elem()
		for m.MapIndex(k).IsValid() {
			change(k, nil)
		}
		m.SetMapIndex(k, reflect.New(v.Type().Elem()).Elem())
		v.Set(m)
	case reflect.Array:
		if v.Len() > 0 {
			change(v.Index(0), nil)
		}
	case reflect.Interface:
		if v.IsNil() {
			v.Set(reflect.ValueOf(true))
			return
		}
		e := deepCopy(v.Elem())
		change(e, nil)
		v.Set(e)
	case reflect.Struct: // a recursive type's field: set it anew
		if v.NumField() > 0 {
			change(v.Field(0), nil)
		}
	default:
		panic(fmt.Sprintf("digestcheck: cannot change a %s", v.Type()))
	}
}

// deepCopy returns a settable copy of v that shares nothing v's fields
// point to.
func deepCopy(v reflect.Value) reflect.Value {
	c := reflect.New(v.Type()).Elem()
	copyInto(c, v)
	return c
}

func copyInto(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyInto(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			copyInto(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		for it := src.MapRange(); it.Next(); {
			e := reflect.New(src.Type().Elem()).Elem()
			copyInto(e, it.Value())
			m.SetMapIndex(it.Key(), e)
		}
		dst.Set(m)
	case reflect.Struct:
		dst.Set(src) // unexported fields come along as they are
		for i := range src.NumField() {
			if dst.Field(i).CanSet() {
				copyInto(dst.Field(i), src.Field(i))
			}
		}
	default:
		dst.Set(src)
	}
}
