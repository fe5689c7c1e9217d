//go:build e2e

package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// The environment every node (and the pushing host) has: secrets a
// document from Redis must never get out of them.
const (
	nodeJWTSecret  = "node-jwt-secret-0123456789abcdef"
	nodeAdminToken = "node-admin-token-0123456789abcdef"
	nodeAppSecret  = "node-app-secret-0123456789abcdef"
)

var nodeSecrets = []string{"JWT_SECRET=" + nodeJWTSecret, "ADMIN_TOKEN=" + nodeAdminToken, "APP_SECRET=" + nodeAppSecret}

// forceConfig writes text into Redis as version v and makes it current,
// as someone who can write to Redis can without `config push`.
func forceConfig(t *testing.T, rd *testutil.Redis, v int, text string) {
	t.Helper()
	digest := fmt.Sprintf("%x", sha256.Sum256([]byte(text)))
	rec := fmt.Sprintf("%d\t%s\tby hand\n%s", time.Now().UnixMilli(), digest, text)
	for _, c := range [][]string{
		{"SET", "{tollgate:config}:seq", strconv.Itoa(v)},
		{"HSET", "{tollgate:config}:docs", strconv.Itoa(v), rec},
		{"SET", "{tollgate:config}:current", strconv.Itoa(v) + " " + digest},
	} {
		if _, err := rd.Command(c...); err != nil {
			t.Fatal(err)
		}
	}
}

func leaks(s string) bool {
	return strings.Contains(s, nodeJWTSecret) || strings.Contains(s, nodeAdminToken) || strings.Contains(s, nodeAppSecret)
}

// TestRedisDocumentCannotReadNodeEnvironment: a document that refers to a
// node's environment outside a secret field is refused by `config push`
// and, written into Redis by hand, by every node; neither the nodes'
// answers, their status, `config status` nor their logs carry the
// secrets. A reference in a secret field still works.
func TestRedisDocumentCannotReadNodeEnvironment(t *testing.T) {
	rd := testutil.StartRedis(t)
	up := testutil.StartQuietUpstream(t, "ok")
	pushConfig(t, rd.Addr, configDoc(up.Addr, 1))
	g := &follower{copy: t.TempDir() + "/config-copy.yaml"}
	g.env = append([]string{"TOLLGATE_REDIS=" + rd.Addr, "TOLLGATE_ADMIN_TOKEN=" + limitsToken, "TOLLGATE_CONFIG_COPY=" + g.copy}, nodeSecrets...)
	g.proc = startProc(t, "", "", g.env, "run", "-c", writeConfig(t, followerBoot))
	g.admin = g.proc.admin
	waitVersion(t, []*follower{g}, 1, 5*time.Second)

	mock := configDoc(up.Addr, 2) + "  - {name: leak, match: {prefix: /leak/}, mock: {responses: [{body: \"admin=${ADMIN_TOKEN} jwt=${JWT_SECRET}\"}]}}\n"
	cmd := exec.Command(binary, "config", "push", writeConfig(t, mock))
	cmd.Env = append(append(os.Environ(), "TOLLGATE_REDIS="+rd.Addr), nodeSecrets...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "routes[2].mock.responses[0].body: ${ADMIN_TOKEN} is expanded only in a secret field") || leaks(string(out)) {
		t.Fatalf("push of a mock body with references: %v\n%s", err, out)
	}

	forceConfig(t, rd, 2, mock)
	waitUntil(t, 3*time.Second, "the node refuses version 2", func() bool {
		c := g.config(t)
		return c.Refused == 2 && c.Version == 1
	})
	if st, body := testutil.Get(t, "http://"+g.addr+"/leak/x"); st != 404 || leaks(body) {
		t.Fatalf("/leak/ answered %d %q", st, body)
	}

	prefix := configDoc(up.Addr, 3) + "  - {name: p, match: {prefix: \"${JWT_SECRET}\"}, service: up}\n"
	forceConfig(t, rd, 3, prefix)
	waitUntil(t, 3*time.Second, "the node refuses version 3", func() bool { return g.config(t).Refused == 3 })
	if c := g.config(t); leaks(c.LastError) || !strings.Contains(c.LastError, "${JWT_SECRET}") {
		t.Fatalf("node status: %+v", c)
	}
	var status string
	waitUntil(t, 3*time.Second, "config status shows the refusal", func() bool {
		out, err := configCLI(t, rd.Addr, "status")
		status = out
		return err == nil && strings.Contains(out, "${JWT_SECRET}")
	})
	if leaks(status) {
		t.Fatalf("config status carries a secret:\n%s", status)
	}

	consumer := configDoc(up.Addr, 4) + "consumers:\n  - {app_key: app, secret: \"${APP_SECRET}\"}\n"
	pushConfig(t, rd.Addr, consumer)
	waitVersion(t, []*follower{g}, 4, 3*time.Second)
	if c := g.config(t); c.LastError != "" {
		t.Fatalf("a reference in a secret field was refused: %+v", c)
	}
	if leaks(g.stderr.String()) {
		t.Fatalf("the node logged a secret:\n%s", g.stderr.String())
	}
}
