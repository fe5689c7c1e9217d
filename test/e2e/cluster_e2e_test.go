//go:build e2e

package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// TestMembershipCountsLiveNodes: with cluster.nodes auto, nodes sharing a
// Redis see each other within seconds, and see a stopped one leave.
func TestMembershipCountsLiveNodes(t *testing.T) {
	rd := testutil.StartRedis(t)
	up := testutil.StartUpstream(t, "ok")
	cfg := writeConfig(t, "services:\n  up: {instances: [{addr: \""+up.Addr+"\"}]}\nroutes:\n  - {name: all, match: {prefix: /}, service: up}\n")
	env := []string{"TOLLGATE_REDIS=" + rd.Addr}
	adminA := startProc(t, "", "", env, "run", "-c", cfg).admin
	b := startProc(t, "", "off", env, "run", "-c", cfg)
	waitStats := func(want string) {
		t.Helper()
		deadline := time.Now().Add(8 * time.Second)
		for {
			_, body := testutil.Get(t, "http://"+adminA+"/admin/stats")
			if strings.Contains(body, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("admin stats never showed %s: %s", want, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitStats(`"cluster_nodes":2`)
	_ = b.cmd.Process.Signal(syscall.SIGTERM) // leaves the membership on its way out
	waitStats(`"cluster_nodes":1`)
}
