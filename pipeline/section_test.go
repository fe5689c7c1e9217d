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

func TestSectionsRefuseCyclesAndStrangers(t *testing.T) {
	for _, c := range []struct {
		byKey map[string]Section
		want  string
	}{
		{map[string]Section{"a": {Key: "a", After: []string{"b"}}, "b": {Key: "b", After: []string{"a"}}}, "each come after the other"},
		{map[string]Section{"a": {Key: "a", After: []string{"nowhere"}}}, "not registered"},
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
