package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Key names one object of type T that a snapshot's build shares between
// its parts (the services, the consumers, the cluster client): the
// section or feature that makes it sets it in the Env, the features that
// use it get it back typed. Keys are made once, as package variables:
//
//	var IdentityKey = pipeline.NewKey[*Identity]("auth.identity")
type Key[T any] struct {
	id *keyID
}

type keyID struct {
	name string
}

var keyNames = struct {
	sync.Mutex
	taken map[string]bool
}{taken: map[string]bool{}}

// NewKey returns the key of a shared object named name ("package.what").
// It panics on a name already taken, a programming error.
func NewKey[T any](name string) Key[T] {
	keyNames.Lock()
	defer keyNames.Unlock()
	if name == "" || keyNames.taken[name] {
		panic(fmt.Sprintf("pipeline: shared key %q is empty or taken", name))
	}
	keyNames.taken[name] = true
	return Key[T]{id: &keyID{name: name}}
}

// Name returns the key's name.
func (k Key[T]) Name() string { return k.id.name }

// Get returns the object set under k, and whether there is one; a nil Env
// (a snapshot built by hand, without compiling) holds nothing.
func (k Key[T]) Get(e *Env) (T, bool) {
	if e == nil {
		var zero T
		return zero, false
	}
	v, ok := e.shared[k.id]
	if !ok {
		var zero T
		return zero, false
	}
	return v.(T), true
}

// Set puts v under k, replacing what was there.
func (k Key[T]) Set(e *Env, v T) {
	if e.shared == nil {
		e.shared = map[*keyID]any{}
	}
	e.shared[k.id] = v
}

// EachShared calls visit for every shared object, in the order of their
// keys' names, so that what reads them all (the metrics writer) reads
// them the same way every time.
func (e *Env) EachShared(visit func(name string, v any)) {
	ids := make([]*keyID, 0, len(e.shared))
	for id := range e.shared {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b *keyID) int { return strings.Compare(a.name, b.name) })
	for _, id := range ids {
		visit(id.name, e.shared[id])
	}
}
