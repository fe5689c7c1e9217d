package tokencache

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/cespare/xxhash/v2"
)

type entry struct {
	tok []byte
	h   uint64
	exp int64
	ref atomic.Uint32
}

func (e *entry) Token() []byte       { return e.tok }
func (e *entry) Hash() uint64        { return e.h }
func (e *entry) Expires() int64      { return e.exp }
func (e *entry) Ref() *atomic.Uint32 { return &e.ref }

func mk(tok string, exp int64) *entry {
	return &entry{tok: []byte(tok), h: xxhash.Sum64String(tok), exp: exp}
}

func TestGetPutEvict(t *testing.T) {
	c := New[*entry](16) // one shard of 16
	for i := range 16 {
		c.Put(mk("t"+strconv.Itoa(i), 100), 0)
	}
	if _, ok := c.Get(xxhash.Sum64String("t3"), []byte("t3")); !ok {
		t.Fatal("a cached token missed")
	}
	// Same hash, other token: a miss, never the other entry.
	if _, ok := c.Get(xxhash.Sum64String("t3"), []byte("t4")); ok {
		t.Fatal("a hash collision returned another token's entry")
	}
	c.Put(mk("new", 100), 200) // full; at time 200 every entry has expired
	if c.Len() != 16 {
		t.Fatalf("len %d", c.Len())
	}
	if _, ok := c.Get(xxhash.Sum64String("new"), []byte("new")); !ok {
		t.Fatal("the new entry was not cached")
	}
	if n := testing.AllocsPerRun(100, func() { c.Get(xxhash.Sum64String("new"), []byte("new")) }); n != 0 {
		t.Fatalf("a hit allocates %v times", n)
	}
}
