package config

import (
	"testing"

	"github.com/tollgate/tollgate/internal/digestcheck"
	"github.com/tollgate/tollgate/pipeline"
)

// The settings config keys reload-surviving state by: a change to any of
// their fields must give a fresh object, never the one built before.
func TestReplayFilterKeyCoversEverySetting(t *testing.T) {
	digestcheck.EveryField(t, nonceSettings{Signature: Signature{Window: Duration(300e9)}}, func(v any) string {
		return nonceKey(v.(nonceSettings))
	})
}

func TestGRPCTLSKeyCoversEverySetting(t *testing.T) {
	digestcheck.EveryField(t, &ClientTLS{CAFile: "ca.pem", line: 3}, pipeline.Digest)
}

// TestReplayFilterIsReleasedLikeOtherState: the replay filter (a Bloom
// filter of some MiB) is kept while the live snapshot's settings ask for
// it, and dropped once none does, like every other reload-surviving
// object: a filter of settings that came back later is a fresh one.
func TestReplayFilterIsReleasedLikeOtherState(t *testing.T) {
	c := NewCompiler()
	build := func(window string) *Snapshot {
		f, err := Parse("t", []byte("signature: {window: "+window+", nonce_rate: 100}\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		f.Defaults()
		s, err := c.Compile(f, "t")
		if err != nil {
			t.Fatal(err)
		}
		c.Release(s)
		return s
	}
	s1, s2 := build("300s"), build("300s")
	if s1.nonces == nil || s1.nonces != s2.nonces {
		t.Fatal("an unchanged signature section got a fresh replay filter")
	}
	if s3 := build("60s"); s3.nonces == s2.nonces {
		t.Fatal("a changed window kept the old replay filter")
	}
	if s4 := build("300s"); s4.nonces == s1.nonces {
		t.Fatal("the filter of settings no snapshot used any more was kept")
	}
}
