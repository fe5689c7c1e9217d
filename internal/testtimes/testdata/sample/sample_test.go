package sample

import (
	"testing"
	"time"
)

func TestSlow(t *testing.T) {
	t.Log("slow talk that passes")
	time.Sleep(300 * time.Millisecond)
}

func TestFast(t *testing.T) {
	t.Run("sub", func(t *testing.T) {})
}

func TestFails(t *testing.T) {
	t.Log("before the failure")
	t.Fatal("the reason it failed")
}

func TestParallelSubtests(t *testing.T) {
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			time.Sleep(200 * time.Millisecond)
		})
	}
}
