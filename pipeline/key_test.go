package pipeline

import (
	"slices"
	"testing"
)

func TestKeyGetSet(t *testing.T) {
	count := NewKey[*int]("test.count")
	port := NewKey[string]("test.port")
	var e Env
	if _, ok := count.Get(&e); ok {
		t.Fatal("an empty Env has an object")
	}
	if _, ok := count.Get(nil); ok {
		t.Fatal("a nil Env has an object")
	}
	n := 3
	count.Set(&e, &n)
	port.Set(&e, "8443")
	if got, ok := count.Get(&e); !ok || got != &n {
		t.Fatalf("count = %v, %v", got, ok)
	}
	if got, _ := port.Get(&e); got != "8443" {
		t.Fatalf("port = %q", got)
	}
	// A copy of the Env sees what was set before it was made, as a
	// build's environment made from a template does.
	c := e
	if got, _ := port.Get(&c); got != "8443" {
		t.Fatalf("copy's port = %q", got)
	}
	var names []string
	e.EachShared(func(name string, _ any) { names = append(names, name) })
	if !slices.Equal(names, []string{"test.count", "test.port"}) {
		t.Fatalf("EachShared visits %v", names)
	}
}

func TestKeyNameTakenPanics(t *testing.T) {
	NewKey[int]("test.once")
	defer func() {
		if recover() == nil {
			t.Fatal("a second key of the same name did not panic")
		}
	}()
	NewKey[string]("test.once")
}
