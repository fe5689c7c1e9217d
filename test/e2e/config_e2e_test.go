//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// configDoc is a configuration for Redis: every version serves /a/ from
// up, so a client sees no difference between versions but errors.
func configDoc(up string, n int) string {
	return fmt.Sprintf(`
services:
  up: {instances: [{addr: %q}]}
routes:
  - {name: a, match: {prefix: /a/}, service: up}
  - {name: v%d, match: {prefix: /v%d/}, service: up}
`, up, n, n)
}

// configCLI runs `tollgate config ARGS...` against redis.
func configCLI(t *testing.T, redis string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"config"}, args...)...)
	// A race-enabled binary waits a second at exit by default; the push
	// latency measured must be the gateway's, not that.
	cmd.Env = append(os.Environ(), "TOLLGATE_REDIS="+redis, "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func pushConfig(t *testing.T, redis, text string) {
	t.Helper()
	if out, err := configCLI(t, redis, "push", writeConfig(t, text)); err != nil {
		t.Fatalf("config push: %v\n%s", err, out)
	}
}

// followerBoot is a node's own file: the default poll (3s), so that a
// change reaching a node well within a second proves Redis told it.
const followerBoot = "config: {source: redis}\n"

// follower is a gateway following the configuration in Redis.
type follower struct {
	*proc
	admin string
	copy  string // its local copy of the configuration
	env   []string
}

func startFollower(t *testing.T, redis, copyPath string) *follower {
	t.Helper()
	boot := writeConfig(t, followerBoot)
	g := &follower{copy: copyPath}
	g.env = []string{"TOLLGATE_REDIS=" + redis, "TOLLGATE_ADMIN_TOKEN=" + limitsToken, "TOLLGATE_CONFIG_COPY=" + copyPath}
	g.proc = startProc(t, "", "", g.env, "run", "-c", boot)
	g.admin = g.proc.admin
	return g
}

func (g *follower) restart(t *testing.T) {
	t.Helper()
	g.proc = startProc(t, g.addr, g.admin, g.env, "run", "-c", writeConfig(t, followerBoot))
}

type clusterConfig struct {
	Version   uint64 `json:"version"`
	From      string `json:"from"`
	Refused   uint64 `json:"refused_version"`
	LastError string `json:"last_error"`
}

func (g *follower) config(t *testing.T) clusterConfig {
	t.Helper()
	var st struct {
		Config clusterConfig `json:"cluster_config"`
	}
	if err := json.Unmarshal(adminGet(t, g.admin, "/admin/stats"), &st); err != nil {
		t.Fatal(err)
	}
	return st.Config
}

func startFollowers(t *testing.T, n int, redis string) []*follower {
	t.Helper()
	dir := t.TempDir()
	var out []*follower
	for i := range n {
		out = append(out, startFollower(t, redis, filepath.Join(dir, "node"+strconv.Itoa(i), "config-copy.yaml")))
	}
	return out
}

func loadOn(gws []*follower) *paced {
	var targets []target
	for i, g := range gws {
		targets = append(targets, target{node: i, addr: g.addr, uri: "/a/x", rate: 300})
	}
	return startPaced(targets)
}

func checkNoClientErrors(t *testing.T, load *paced) {
	t.Helper()
	evs := load.sel(where{from: time.Time{}, to: time.Now().Add(time.Hour), node: -1, path: -1})
	if ok := countStatus(evs, 200); ok != len(evs) || ok == 0 {
		t.Fatalf("client saw errors: %d requests, statuses %s", len(evs), statusSummary(evs))
	}
	t.Logf("load: %d requests, statuses %s", len(evs), statusSummary(evs))
}

// waitVersion waits until every node runs version v and returns how long
// each took.
func waitVersion(t *testing.T, gws []*follower, v uint64, limit time.Duration) []time.Duration {
	t.Helper()
	start := time.Now()
	took := make([]time.Duration, len(gws))
	var wg sync.WaitGroup
	for i, g := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < limit {
				if g.config(t).Version == v {
					took[i] = time.Since(start)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			took[i] = -1
		}()
	}
	wg.Wait()
	for i, d := range took {
		if d < 0 {
			t.Fatalf("node %d not on version %d within %v: %+v", i, v, limit, gws[i].config(t))
		}
	}
	return took
}

// TestConfigPushReachesEveryNode: three nodes follow the configuration in
// one Redis. Under load, a push reaches all three within a second; a bad
// document is refused by push, and one forced into Redis by hand is
// refused by every node, which keeps its version and reports the error;
// a rollback reaches every node like a push. No client sees an error.
func TestConfigPushReachesEveryNode(t *testing.T) {
	rd := testutil.StartRedis(t)
	up := testutil.StartQuietUpstream(t, "ok")
	pushConfig(t, rd.Addr, configDoc(up.Addr, 1))
	gws := startFollowers(t, 3, rd.Addr)
	waitVersion(t, gws, 1, 5*time.Second)
	load := loadOn(gws)
	time.Sleep(500 * time.Millisecond)

	pushed := time.Now()
	pushConfig(t, rd.Addr, configDoc(up.Addr, 2))
	pushTook := time.Since(pushed)
	took := waitVersion(t, gws, 2, 3*time.Second)
	for i, d := range took {
		t.Logf("node %d runs version 2 %v after the push started (the push command took %v)", i, (pushTook + d).Round(time.Millisecond), pushTook.Round(time.Millisecond))
		if d+pushTook > time.Second {
			t.Fatalf("node %d: push to version took %v", i, d+pushTook)
		}
	}

	bad := strings.Replace(configDoc(up.Addr, 3), "prefix: /v3/}", "prefix: /v3/, priorty: 2}", 1)
	out, err := configCLI(t, rd.Addr, "push", writeConfig(t, bad))
	if err == nil || !strings.Contains(out, ":6:") || !strings.Contains(out, "priorty") {
		t.Fatalf("bad push not refused with its place: %v\n%s", err, out)
	}
	// Forced in by hand, the way a script that skips validation would.
	rec := fmt.Sprintf("%d\tdeadbeef\tby hand\n%s", time.Now().UnixMilli(), bad)
	digest := fmt.Sprintf("%x", sha256.Sum256([]byte(bad)))
	rec = strings.Replace(rec, "deadbeef", digest, 1)
	for _, c := range [][]string{
		{"SET", "{tollgate:config}:seq", "3"},
		{"HSET", "{tollgate:config}:docs", "3", rec},
		{"SET", "{tollgate:config}:current", "3 " + digest},
	} {
		if _, err := rd.Command(c...); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 3*time.Second, "every node refuses version 3", func() bool {
		for _, g := range gws {
			if c := g.config(t); c.Refused != 3 || c.Version != 2 || !strings.Contains(c.LastError, "priorty") {
				return false
			}
		}
		return true
	})
	waitUntil(t, 3*time.Second, "config status shows the error", func() bool {
		out, err := configCLI(t, rd.Addr, "status")
		return err == nil && strings.Count(out, "priorty") == 3 && strings.Count(out, "2 (behind)") == 3
	})
	out, _ = configCLI(t, rd.Addr, "status")
	t.Logf("config status:\n%s", out)

	if out, err := configCLI(t, rd.Addr, "rollback", "--to", "1"); err != nil || !strings.Contains(out, "as version 4") {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	waitVersion(t, gws, 4, time.Second)
	for i, g := range gws {
		if c := g.config(t); c.LastError != "" {
			t.Fatalf("node %d still reports %q after a good version", i, c.LastError)
		}
		if st, _ := testutil.Get(t, "http://"+g.addr+"/v1/x"); st != 200 {
			t.Fatalf("node %d: the rolled back version's route answers %d", i, st)
		}
	}
	if out, err := configCLI(t, rd.Addr, "show", "4"); err != nil || !strings.Contains(out, "/v1/") {
		t.Fatalf("show 4: %v\n%s", err, out)
	}
	clear := configDoc(up.Addr, 5) + "consumers:\n  - {app_key: app, secret: in-clear-0123456789abcdef}\n"
	if out, err := configCLI(t, rd.Addr, "push", writeConfig(t, clear)); err == nil || !strings.Contains(out, ":8:") || !strings.Contains(out, "in clear") {
		t.Fatalf("a secret in clear was not refused: %v\n%s", err, out)
	}
	load.finish()
	checkNoClientErrors(t, load)
}

// TestConfigThroughRedisOutage: Redis is killed under load. The nodes keep
// serving; a node that missed a version and starts while Redis is down
// runs its local copy and says so; when Redis is back, it catches up by
// itself, and the next push reaches every node.
func TestConfigThroughRedisOutage(t *testing.T) {
	rd := testutil.StartRedis(t)
	up := testutil.StartQuietUpstream(t, "ok")
	pushConfig(t, rd.Addr, configDoc(up.Addr, 1))
	gws := startFollowers(t, 3, rd.Addr)
	waitVersion(t, gws, 1, 5*time.Second)

	_ = gws[2].cmd.Process.Signal(syscall.SIGTERM)
	<-gws[2].done
	gws[2].done <- nil // for the cleanup
	pushConfig(t, rd.Addr, configDoc(up.Addr, 2))
	waitVersion(t, gws[:2], 2, time.Second)
	if _, err := rd.Command("SAVE"); err != nil { // Redis comes back with its data
		t.Fatal(err)
	}
	load := loadOn(gws[:2])
	rd.Kill()
	gws[2].restart(t)
	if c := gws[2].config(t); c.Version != 1 || c.From != "local copy" {
		t.Fatalf("node started without redis: %+v, want version 1 from its local copy", c)
	}
	if !strings.Contains(gws[2].stderr.String(), "running the local copy") {
		t.Fatalf("the node did not say it runs its local copy:\n%s", gws[2].stderr.String())
	}
	time.Sleep(time.Second)

	rd.Restart()
	took := waitVersion(t, gws, 2, 5*time.Second)
	t.Logf("after redis came back, the node on its local copy ran version 2 in %v", took[2].Round(time.Millisecond))
	pushConfig(t, rd.Addr, configDoc(up.Addr, 3))
	waitVersion(t, gws, 3, time.Second)
	load.finish()
	checkNoClientErrors(t, load)
}

// TestHundredPushesInARow: under load, 100 pushes one after the other;
// every node ends on the last, never refused one, and no client sees an
// error.
func TestHundredPushesInARow(t *testing.T) {
	rd := testutil.StartRedis(t)
	up := testutil.StartQuietUpstream(t, "ok")
	pushConfig(t, rd.Addr, configDoc(up.Addr, 1))
	gws := startFollowers(t, 3, rd.Addr)
	waitVersion(t, gws, 1, 5*time.Second)
	load := loadOn(gws)
	for i := 2; i <= 101; i++ {
		pushConfig(t, rd.Addr, configDoc(up.Addr, i))
	}
	took := waitVersion(t, gws, 101, 2*time.Second)
	t.Logf("every node on version 101 within %v of the last push", slices.Max(took).Round(time.Millisecond))
	load.finish()
	checkNoClientErrors(t, load)
	for i, g := range gws {
		if c := g.config(t); c.LastError != "" || c.Refused != 0 {
			t.Fatalf("node %d refused a version: %+v", i, c)
		}
		if strings.Contains(g.stderr.String(), "reload refused") {
			t.Fatalf("node %d: a reload failed:\n%s", i, g.stderr.String())
		}
	}
}
