package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPoolTakesPercentilesOverEveryFile(t *testing.T) {
	const ms = int64(time.Millisecond)
	dir := t.TempDir()
	// Two rounds of 1,000 requests. The first is all 1 ms; the second has
	// its 20 slowest at 12 ms. Each round's own p99.9 is 1 ms and 12 ms, so
	// their median says little. Over all 2,000 requests p99.9 is 12 ms
	// (20 are slower than 1 ms, more than 2) and p99 still 1 ms (the
	// 1,980th of 2,000).
	quick := make([]int64, 1000)
	slow := make([]int64, 1000)
	for i := range quick {
		quick[i] = 1 * ms
		slow[i] = 1 * ms
		if i >= 980 {
			slow[i] = 12 * ms
		}
	}
	a, b := filepath.Join(dir, "a.lat"), filepath.Join(dir, "b.lat")
	if err := writeLatencies(a, &result{corrected: quick, service: quick}); err != nil {
		t.Fatal(err)
	}
	svc := make([]int64, 1000)
	for i := range svc {
		svc[i] = 1 * ms
	}
	if err := writeLatencies(b, &result{corrected: slow, service: svc}); err != nil {
		t.Fatal(err)
	}

	var out strings.Builder
	if err := pool(&out, "gw", []string{a, b}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"label=gw", "files=2", "answered=2000",
		"c_p99_ms=1.000", "c_p999_ms=12.000", "s_p999_ms=1.000", "c_over_5ms=20", "c_over_10ms=20"} {
		if !strings.Contains(out.String(), " "+want) {
			t.Errorf("pooled line lacks %q: %s", want, out.String())
		}
	}
}

func TestPoolRefusesADamagedFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.lat")
	if err := writeLatencies(good, &result{corrected: []int64{1, 2}, service: []int64{1, 2}}); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"cut":      whole[:len(whole)-3],
		"trailing": append(append([]byte{}, whole...), 0),
		"huge":     {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"empty":    {},
	} {
		p := filepath.Join(dir, name+".lat")
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := pool(&strings.Builder{}, "", []string{good, p}); err == nil {
			t.Errorf("%s file pooled without an error", name)
		}
	}
	if err := pool(&strings.Builder{}, "", nil); err == nil {
		t.Error("no files pooled without an error")
	}
}
