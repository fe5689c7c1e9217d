package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/history"
)

const limitsUsageText = `Usage: tollgate limits suggest (--redis ADDR | --admin URL) [--days N] [--headroom F] [--burst F]

Prints a rate limit for every route that had traffic, from the history the
gateway keeps (each route's requests per minute, summed by hour): the
busiest minute's rate per second times the headroom, with the reasons, as
YAML to paste into each route. From a cluster's Redis the history is the
whole cluster's (scope: cluster); from a node's admin API, that node's own
(scope: local).

Flags (before or after the others):
  --redis ADDR     the cluster's Redis (default TOLLGATE_REDIS)
  --admin URL      a node's admin API instead, e.g. http://127.0.0.1:9901
                   (its token from TOLLGATE_ADMIN_TOKEN)
  --days N         how far back to look (default 7; Redis keeps 8 days, a
                   node 7)
  --headroom F     multiplies the busiest minute's rate (default 2: a
                   minute's average hides faster bursts inside it)
  --burst F        the bucket, in seconds of the rate (default 2)
`

// limitsCommand implements "tollgate limits suggest": 0 when the
// suggestions are printed, 1 when the history cannot be read, 2 on bad
// arguments.
func limitsCommand(args []string, stdout, stderr io.Writer) int {
	bad := func(err error) int {
		fmt.Fprintf(stderr, "tollgate limits: %v\n\n%s", err, limitsUsageText)
		return 2
	}
	fs := flag.NewFlagSet("limits", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	redis := fs.String("redis", os.Getenv("TOLLGATE_REDIS"), "")
	adminURL := fs.String("admin", "", "")
	days := fs.Int("days", 7, "")
	var o history.Options
	fs.Float64Var(&o.Headroom, "headroom", 2, "")
	fs.Float64Var(&o.BurstFactor, "burst", 2, "")
	positional, help, err := parseInterleaved(fs, args)
	if help {
		fmt.Fprint(stdout, limitsUsageText)
		return 0
	}
	switch {
	case err != nil:
		return bad(err)
	case len(positional) != 1 || positional[0] != "suggest":
		return bad(errors.New("give the subcommand: suggest"))
	case *days < 1 || *days > 8:
		return bad(errors.New("--days: 1 to 8"))
	case o.Headroom < 1 || o.BurstFactor < 1:
		return bad(errors.New("--headroom and --burst: 1 or more"))
	case *adminURL != "" && isSet(fs, "redis"):
		return bad(errors.New("give --redis or --admin, not both"))
	case *adminURL == "" && *redis == "":
		return bad(errors.New("give --redis (or TOLLGATE_REDIS) or --admin"))
	}
	now := time.Now().UTC()
	since := now.Truncate(time.Hour).Add(-time.Duration(*days*24-1) * time.Hour)
	var hours []history.Hour
	var scope, source string
	if *adminURL != "" {
		hours, err = historyFromAdmin(*adminURL, *days*24)
		scope, source = "local", "the node at "+*adminURL+" (its own traffic only)"
	} else {
		hours, err = historyFromRedis(*redis, since, now)
		scope, source = "cluster", "the cluster's history in Redis at "+*redis
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate limits:", err)
		return 1
	}
	if err := history.WriteYAML(stdout, history.Suggest(hours, o), o, scope, source, since, now); err != nil {
		fmt.Fprintln(stderr, "tollgate limits:", err)
		return 1
	}
	return 0
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func historyFromRedis(addrs string, since, now time.Time) ([]history.Hour, error) {
	cl, err := dialCluster(addrs)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return history.ReadRedis(ctx, cl, since, now)
}

func historyFromAdmin(base string, hours int) ([]history.Hour, error) {
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(base, "/")+"/admin/history?hours="+strconv.Itoa(hours), nil)
	if err != nil {
		return nil, err
	}
	if tok := os.Getenv("TOLLGATE_ADMIN_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s %s", req.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	var out struct {
		Hours []history.Hour `json:"hours"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", req.URL, err)
	}
	return out.Hours, nil
}
