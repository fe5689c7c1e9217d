package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/history"
	"github.com/tollgate/tollgate/internal/testutil"
	"gopkg.in/yaml.v3"
)

// TestLimitsSuggestFromRedis: three nodes' minutes of the last hours in
// a real Redis; tollgate limits suggest prints, for every route, a limit
// no lower than the cluster's busiest minute, with its reasons, as YAML
// that a configuration takes as it is.
func TestLimitsSuggestFromRedis(t *testing.T) {
	rd := testutil.StartRedis(t)
	var sinks []*history.Redis
	for i := range 3 {
		c, err := cluster.New(cluster.Options{Addrs: []string{rd.Addr}, NodeID: fmt.Sprintf("n%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		sinks = append(sinks, &history.Redis{Client: c})
	}
	// Three hours: orders carries 300 a minute per node, with one surge
	// minute two hours ago (node 0 takes 2,100 then: the cluster 2,700);
	// search is quiet on one node.
	start := time.Now().UTC().Truncate(time.Minute).Add(-3 * time.Hour)
	surge := start.Add(61 * time.Minute)
	for m := start; m.Before(start.Add(3 * time.Hour)); m = m.Add(time.Minute) {
		for i, s := range sinks {
			counts := map[string]uint64{"orders": 300}
			if i == 0 && m.Equal(surge) {
				counts["orders"] = 2100
			}
			if i == 2 {
				counts["search"] = 12
			}
			s.AddMinute(m, counts)
		}
	}
	var out, errOut bytes.Buffer
	if code := mainWithArgs([]string{"limits", "--headroom", "1.5", "suggest", "--redis", rd.Addr}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	t.Logf("suggested:\n%s", out.String())
	var doc struct {
		Routes []struct {
			Name   string
			Limits []struct {
				By    string
				Rate  float64
				Per   string
				Burst float64
				Scope string
			}
		}
	}
	if err := yaml.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	peaks := map[string]float64{"orders": 2700, "search": 12}
	if len(doc.Routes) != 2 {
		t.Fatalf("routes %+v", doc.Routes)
	}
	for _, r := range doc.Routes {
		if len(r.Limits) != 1 || r.Limits[0].Per != "1s" || r.Limits[0].Scope != "cluster" || r.Limits[0].By != "route" {
			t.Fatalf("%s: limits %+v", r.Name, r.Limits)
		}
		if l := r.Limits[0]; l.Rate*60 < peaks[r.Name] || l.Burst < l.Rate {
			t.Fatalf("%s: rate %v/s burst %v under its busiest minute, %v requests", r.Name, l.Rate, l.Burst, peaks[r.Name])
		}
	}
	if !strings.Contains(out.String(), "busiest minute "+surge.Format("2006-01-02 15:04")+": 2700 requests (45/s)") {
		t.Fatalf("the surge minute is not named:\n%s", out.String())
	}

	// Pasted into a configuration, as the header says.
	var cfg strings.Builder
	cfg.WriteString("services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\nroutes:\n")
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "  - name: ") {
			cfg.WriteString(line + "\n    match: {prefix: /" + strings.Trim(strings.TrimPrefix(line, "  - name: "), `"`) + "}\n    service: s\n")
		} else if strings.HasPrefix(line, "    ") {
			cfg.WriteString(line + "\n")
		}
	}
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c := config.NewCompiler()
	c.Offline = true
	snap, err := c.Load(path, nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("the suggestion does not load:\n%s\n%v", cfg.String(), err)
	}
	c.Discard(snap)
}

// TestLimitsSuggestArguments: usage on stdout for --help, exit 2 for what
// cannot work.
func TestLimitsSuggestArguments(t *testing.T) {
	var out bytes.Buffer
	if code := mainWithArgs([]string{"limits", "--help"}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "tollgate limits suggest") {
		t.Fatalf("--help: %d %q", code, out.String())
	}
	t.Setenv("TOLLGATE_REDIS", "")
	for _, args := range [][]string{{"limits"}, {"limits", "suggest"}, {"limits", "suggest", "--redis", "x", "--admin", "http://y"}, {"limits", "suggest", "--redis", "x", "--days", "30"}, {"limits", "suggest", "--admin", "http://y", "--headroom", "0.5"}} {
		if code := mainWithArgs(args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
