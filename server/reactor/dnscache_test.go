//go:build linux

package reactor

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestDNSCache(t *testing.T) {
	lookups := 0
	answer := []netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.2")}
	var fail error
	d := newDNSCache()
	d.lookup = func(context.Context, string) ([]netip.Addr, error) {
		lookups++
		return answer, fail
	}
	now := time.Now()
	get := func(at time.Time) netip.Addr {
		t.Helper()
		if a, ok := d.cached("svc", at); ok {
			return a
		}
		a, err := d.resolve(context.Background(), "svc", at)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// IPv4 addresses only (the pools dial them), unmapped, in turn.
	var got []string
	for range 3 {
		got = append(got, get(now).String())
	}
	if want := []string{"10.0.0.1", "10.0.0.2", "10.0.0.1"}; !slices.Equal(got, want) || lookups != 1 {
		t.Fatalf("addresses %v after %d lookups, want %v after 1", got, lookups, want)
	}
	// Looked up again once the entry is a minute old, still in turn.
	if a := get(now.Add(dnsTTL)); a.String() != "10.0.0.2" || lookups != 2 {
		t.Fatalf("after the TTL: %v after %d lookups, want 10.0.0.2 after 2", a, lookups)
	}
	// A failed lookup is an error and leaves no entry behind.
	fail = errors.New("no such host")
	if _, err := d.resolve(context.Background(), "other", now); err == nil {
		t.Fatal("a failed lookup gave an address")
	}
	if _, ok := d.cached("other", now); ok {
		t.Fatal("a failed lookup was cached")
	}
	// A name with IPv6 addresses only is dialed on them.
	fail, answer = nil, []netip.Addr{netip.MustParseAddr("::1")}
	if a, err := d.resolve(context.Background(), "v6", now); err != nil || a.String() != "::1" {
		t.Fatalf("IPv6-only name: %v, %v", a, err)
	}
}
