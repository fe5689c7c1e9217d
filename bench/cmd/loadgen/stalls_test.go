package main

import (
	"testing"
	"time"
)

func TestStallsJoinRequestsDueClose(t *testing.T) {
	const ms = int64(time.Millisecond)
	// Ten requests due 1 ms apart: two slow ones 1 ms apart join; one not
	// answered (no latency) is in no stall; two slow ones stallGap apart
	// do not join.
	corr := []int64{1 * ms, 9 * ms, 8 * ms, 0, 1 * ms, 1 * ms, 7 * ms, 1 * ms, 6 * ms, 1 * ms}
	lag := []int64{0, 2 * ms, 0, 0, 0, 0, 0, 0, 3 * ms, 0}
	due := func(j int) time.Duration { return time.Duration(j) * time.Millisecond }

	got := stallsOf(corr, lag, due, 5*time.Millisecond)
	want := []stall{
		{due: 1 * time.Millisecond, span: 1 * time.Millisecond, n: 2, worst: 9 * time.Millisecond, worstLag: 2 * time.Millisecond},
		{due: 6 * time.Millisecond, n: 1, worst: 7 * time.Millisecond},
		{due: 8 * time.Millisecond, n: 1, worst: 6 * time.Millisecond, worstLag: 3 * time.Millisecond},
	}
	if len(got) != len(want) {
		t.Fatalf("stalls = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("stall %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestCountOverCountsLongerOnly(t *testing.T) {
	ms := int64(time.Millisecond)
	sorted := []int64{1 * ms, 5 * ms, 5 * ms, 5*ms + 1, 9 * ms, 12 * ms}
	if got := countOver(sorted, 5*time.Millisecond); got != 3 {
		t.Errorf("over 5 ms: %d, want 3", got)
	}
	if got := countOver(sorted, 20*time.Millisecond); got != 0 {
		t.Errorf("over 20 ms: %d, want 0", got)
	}
	if got := countOver(sorted, 0); got != 6 {
		t.Errorf("over 0: %d, want 6", got)
	}
}
