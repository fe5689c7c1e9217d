package pipeline

import (
	"fmt"
	"strings"
	"testing"
)

func TestSectionsProvisionAfterWhatTheyRead(t *testing.T) {
	sec := func(key string, after ...string) Section { return Section{Key: key, After: after} }
	got := provisionOrder(map[string]Section{
		"consumers": sec("consumers", "tiers"),
		"tiers":     sec("tiers"),
		"alerts":    sec("alerts", "services", "consumers"),
		"services":  sec("services"),
		"status":    sec("status"),
	})
	var keys []string
	for _, s := range got {
		keys = append(keys, s.Key)
	}
	if want := "tiers consumers services alerts status"; strings.Join(keys, " ") != want {
		t.Fatalf("order %v, want %s", keys, want)
	}
}

// TestSectionsPassOverOwnersNotLinkedIn: a section may wait for one of a
// package the binary does not link (the limiter's tiers for auth's
// consumers); it then comes in its place by key.
func TestSectionsPassOverOwnersNotLinkedIn(t *testing.T) {
	got := provisionOrder(map[string]Section{
		"tiers":  {Key: "tiers", After: []string{"consumers"}},
		"status": {Key: "status"},
	})
	if len(got) != 2 || got[0].Key != "status" || got[1].Key != "tiers" {
		t.Fatalf("order %v, want status then tiers", got)
	}
}

func TestSectionsRefuseCycles(t *testing.T) {
	for _, c := range []struct {
		byKey map[string]Section
		want  string
	}{
		{map[string]Section{"a": {Key: "a", After: []string{"b"}}, "b": {Key: "b", After: []string{"a"}}}, "each come after the other"},
		{map[string]Section{"a": {Key: "a", After: []string{"c"}}, "b": {Key: "b", After: []string{"a"}}, "c": {Key: "c", After: []string{"b"}}}, "each come after the other"},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Errorf("recovered %v, want %q", r, c.want)
				}
			}()
			provisionOrder(c.byKey)
		}()
	}
}
