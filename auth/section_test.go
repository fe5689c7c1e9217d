package auth

import (
	"testing"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/digestcheck"
)

// The replay filter is kept across reloads by its settings: a change to
// any of their fields must give a fresh filter, never the one built
// before.
func TestReplayFilterKeyCoversEverySetting(t *testing.T) {
	digestcheck.EveryField(t, nonceSettings{Signature: SignatureSettings{Window: 300e9}}, func(v any) string {
		return nonceKey(v.(nonceSettings))
	})
}

// TestReplayFilterIsReleasedLikeOtherState: the replay filter (a Bloom
// filter of some MiB) is kept while the live snapshot's settings ask for
// it, and dropped once none does, like every other reload-surviving
// object: a filter of settings that came back later is a fresh one.
func TestReplayFilterIsReleasedLikeOtherState(t *testing.T) {
	c := config.NewCompiler()
	build := func(window string) *NonceStore {
		f, err := config.Parse("t", []byte("signature: {window: "+window+", nonce_rate: 100}\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		f.Defaults()
		s, err := c.Compile(f, "t")
		if err != nil {
			t.Fatal(err)
		}
		c.Release(s)
		sig, _ := signedKey.Get(s.Env())
		return sig.nonces
	}
	n1, n2 := build("300s"), build("300s")
	if n1 == nil || n1 != n2 {
		t.Fatal("an unchanged signature section got a fresh replay filter")
	}
	if n3 := build("60s"); n3 == n2 {
		t.Fatal("a changed window kept the old replay filter")
	}
	if n4 := build("300s"); n4 == n1 {
		t.Fatal("the filter of settings no snapshot used any more was kept")
	}
}
