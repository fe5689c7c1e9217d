package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// A node file following Redis, its admin token a reference inside a flow
// mapping: the follower and `validate` read it the same way, so one cannot
// accept what the other refuses.
func TestFollowerReadsReferencesInFlowMappings(t *testing.T) {
	dir := t.TempDir()
	boot := filepath.Join(dir, "node.yaml")
	text := "config: {source: redis, local_copy: " + filepath.Join(dir, "copy.yaml") + "}\n" +
		"admin: {listen: \"127.0.0.1:0\", token: ${TOLLGATE_ADMIN_TOKEN}}\n" +
		"cluster: {redis: \"127.0.0.1:1\"}\n"
	if err := os.WriteFile(boot, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		if k == "TOLLGATE_ADMIN_TOKEN" {
			return "a-token-of-some-length", true
		}
		return "", false
	}
	c := NewCompiler()
	defer c.Close()
	fw, err := NewFollower(c, boot, env)
	if err != nil {
		t.Fatalf("NewFollower: %v", err)
	}
	fw.Cluster().Close()
}

// goTypeName matches what a Go type looks like in a message (float64,
// []config.Instance, upstream.WebSocketConfig, !!str): never shown to
// operators, who know the configuration, not its types.
var goTypeName = regexp.MustCompile(`!!|\b(u?int(8|16|32|64)?|float(32|64)|bool|string)\b|\[\]|\b[a-z]+\.[A-Z]\w+`)

// TestThreeMistakesThreeLocatedMessages: a file with several different
// mistakes gets one message for each, each at file:line:col, in one pass.
func TestThreeMistakesThreeLocatedMessages(t *testing.T) {
	src := "listen: \":8080\"\n" +
		"admin:\n" +
		"  listn: \"127.0.0.1:9901\"\n" + // 3: a misspelt key
		"services:\n" +
		"  up:\n" +
		"    instances: {addr: \"127.0.0.1:9\"}\n" + // 6: a mapping for a list
		"    max_conns: two\n" + // 7: text for a number
		"client:\n" +
		"  max_body_bytes: ${UNSET_FOR_THIS_TEST}\n" // 9: an unset variable
	_, err := Parse("test.yaml", []byte(src), noEnv)
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`test.yaml:3:3: unknown setting "admin.listn" (did you mean "listen"?)`,
		`test.yaml:6:16: expected a list of instances, got a mapping`,
		`test.yaml:7:16: expected a whole number, got "two"`,
		`test.yaml:9:19: ${UNSET_FOR_THIS_TEST} is not set in the environment`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d messages, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("message %d: %q, want it to start %q", i, lines[i], w)
		}
		if m := goTypeName.FindString(lines[i]); m != "" {
			t.Errorf("message %d names a Go type (%q): %s", i, m, lines[i])
		}
	}
	var all *Errors
	if !errors.As(err, &all) || all.Total != 4 {
		t.Fatalf("%T %v: want 4 Errors", err, err)
	}
}

// TestTypeMistakesInTheConfigurationsWords: each kind of value the
// configuration decodes into is named as the file writes it.
func TestTypeMistakesInTheConfigurationsWords(t *testing.T) {
	route := "routes:\n  - name: a\n    match: {prefix: /}\n    service: up\n"
	svc := "services:\n  up: {instances: [{addr: \"127.0.0.1:9\"}]}\n"
	for _, tc := range []struct{ src, want string }{
		{svc + "client: {max_conns: lots}\n", `:3:21: expected a whole number, got "lots"`},
		{svc + route + "    split: [{service: up, percent: two}]\n", `:7:36: expected a number, got "two"`},
		{svc + "client: {h2c: maybe}\n", `:3:15: expected true or false, got "maybe"`},
		{svc + "client: {trusted_proxies: 10.0.0.0/8}\n", `:3:27: expected a list of strings, got "10.0.0.0/8"`},
		{svc + "routes: {a: 1}\n", `:3:9: expected a list of routes, got a mapping`},
		{svc + route + "    mock: {responses: [{headers: [a]}]}\n", `:7:34: expected a map of strings, got a list`},
		{svc + route + "    websocket: [on]\n", `:7:16: expected a mapping of web socket settings, got a list`},
		{"services:\n  up:\n    instances: [{addr: \"127.0.0.1:9\", weight: heavy}]\n", `:3:47: expected a whole number, got "heavy"`},
	} {
		_, err := Parse("t.yaml", []byte(tc.src), noEnv)
		if err == nil || !strings.HasPrefix(err.Error(), "t.yaml"+tc.want) {
			t.Errorf("%q:\n got %v\nwant t.yaml%s", tc.src, err, tc.want)
			continue
		}
		if m := goTypeName.FindString(err.Error()); m != "" {
			t.Errorf("%q: names a Go type (%q): %v", tc.src, m, err)
		}
	}
}

// TestManyMistakesAreBounded: every mistake is found, the first 20 shown.
func TestManyMistakesAreBounded(t *testing.T) {
	var b strings.Builder
	for i := range 25 {
		fmt.Fprintf(&b, "unknown_%d: 1\n", i)
	}
	_, err := Parse("t.yaml", []byte(b.String()), noEnv)
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 21 || lines[20] != "and 5 more" || !strings.HasPrefix(lines[19], "t.yaml:20:1: ") {
		t.Fatalf("got %d lines, last %q:\n%v", len(lines), lines[len(lines)-1], err)
	}
}

// TestDidYouMeanAtEveryLevel: a near miss of a known key is named, at the
// top, in a nested setting, on a route, in a section and in a section's
// plug-in; a key near nothing gets no guess.
func TestDidYouMeanAtEveryLevel(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"lisen: \":1\"\n", `t.yaml:1:1: unknown setting "lisen" (did you mean "listen"?)`},
		{"client: {max_con: 3}\n", `t.yaml:1:10: unknown setting "client.max_con" (did you mean "max_conns"?)`},
		{"routes:\n  - {name: a, priorty: 1, mock: {responses: [{}]}}\n", `t.yaml:2:15: unknown setting "routes[0].priorty" (did you mean "priority"?)`},
		{"routes:\n  - {name: a, rewrit: {path: /}, mock: {responses: [{}]}}\n", `t.yaml:2:15: unknown setting "routes[0].rewrit" (did you mean "rewrite"?)`},
		{"status: {local_limt: 429}\n", `t.yaml:1:10: unknown setting "status.local_limt" (did you mean "local_limit"?)`},
		{"statu: {local_limit: 429}\n", `t.yaml:1:1: unknown setting "statu" (did you mean "status"?)`},
		{"discovery:\n  etc: {endpoints: [\"a:1\"]}\n", `t.yaml:2:3: unknown setting "discovery.etc" (did you mean "etcd"?)`},
		{"discovery:\n  etcd: {endpoint: [\"a:1\"]}\n", `t.yaml:2:10: unknown setting "discovery.etcd.endpoint" (did you mean "endpoints"?)`},
		{"zzzzzz: 1\n", `t.yaml:1:1: unknown setting "zzzzzz"`},
	} {
		_, err := Parse("t.yaml", []byte(tc.src), noEnv)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

// TestReferenceDefaultsAndEscapes: ${NAME:-default} stands for the
// default when NAME is not set and for NAME's value when it is; $${NAME}
// is the text ${NAME}, expanded from nothing.
func TestReferenceDefaultsAndEscapes(t *testing.T) {
	src := "listen: \"${LISTEN_HERE:-127.0.0.1:8081}\"\n" +
		"node_id: ${NODE_HERE:-n1}\n" +
		"log_level: ${LEVEL_HERE:-}\n" +
		"admin: {listen: \"$${NOT_EXPANDED}\", token: $${ALSO_NOT}}\n"
	env := func(k string) (string, bool) {
		if k == "NODE_HERE" {
			return "node-7", true
		}
		return "", false
	}
	f, err := Parse("t.yaml", []byte(src), env)
	if err != nil {
		t.Fatal(err)
	}
	if f.Listen != "127.0.0.1:8081" || f.NodeID != "node-7" || f.LogLevel != "" {
		t.Fatalf("listen %q node_id %q log_level %q", f.Listen, f.NodeID, f.LogLevel)
	}
	if f.Admin.Listen != "${NOT_EXPANDED}" || f.Admin.Token != "${ALSO_NOT}" {
		t.Fatalf("escapes: listen %q token %q", f.Admin.Listen, f.Admin.Token)
	}
}

// TestSemanticErrorsArePlaced: errors found once the file compiles name
// the place of what they are about.
func TestSemanticErrorsArePlaced(t *testing.T) {
	svc := "services:\n  up: {instances: [{addr: \"127.0.0.1:9\"}]}\n"
	for _, tc := range []struct{ src, want string }{
		{svc + "consumers:\n  - {app_key: one, secret: \"0123456789abcdef\"}\n  - {app_key: two, secret: short}\n",
			`test.yaml:5:15: consumer "two": secret must be at least 16 bytes`},
		{svc + "default_service: nowhere\n", `test.yaml:3:18: default_service "nowhere" is not a defined service`},
		{svc + "consumers:\n  - {app_key: one, secret: \"0123456789abcdef\"}\n  - {app_key: one, secret: \"0123456789abcdef\"}\n",
			`test.yaml:5:15: consumer "one" is defined twice`},
		{svc + "routes:\n  - name: a\n    match: {prefix: /}\n    service: nowhere\n", `test.yaml:6:14: route "a": service "nowhere" is not defined`},
	} {
		_, err := compile(t, tc.src, noEnv)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

// TestFollowerRunsTheVersionInRedis: the snapshot a follower compiles
// carries the version it came from in Redis, whatever this process's
// count of loads, and nodes on one host get local copies of their own.
func TestFollowerRunsTheVersionInRedis(t *testing.T) {
	rd := testutil.StartRedis(t)
	dir := t.TempDir()
	boot := filepath.Join(dir, "boot.yaml")
	if err := os.WriteFile(boot, []byte("listen: \"127.0.0.1:18080\"\nconfig: {source: redis}\ncluster: {redis: \""+rd.Addr+"\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := NewCompiler()
	defer c.Close()
	fw, err := NewFollower(c, boot, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Cluster().Close()
	text := "services:\n  up: {instances: [{addr: \"127.0.0.1:9\"}]}\nroutes:\n  - {name: a, match: {prefix: /}, service: up}\n"
	for range 4 {
		d := StoredConfig{StoredVersion: StoredVersion{Digest: digestOf([]byte(text))}, Author: "test", At: time.Now(), Text: []byte(text)}
		if _, err := NewStore(fw.Cluster()).Push(context.Background(), d, 10, 0); err != nil {
			t.Fatal(err)
		}
	}
	var snap *Snapshot
	deadline := time.Now().Add(3 * time.Second)
	for snap == nil {
		if snap, err = fw.Load(); err != nil && time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if snap.ClusterVersion != 4 || snap.Version != 1 {
		t.Fatalf("cluster version %d, loads %d; want 4 and 1", snap.ClusterVersion, snap.Version)
	}

	a, err := ReadBytes("a.yaml", []byte("listen: \":8081\"\nnode_id: \"edge 1/a\"\nconfig: {source: redis}\ncluster: {redis: \"x:1\"}\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadBytes("b.yaml", []byte("listen: \":8082\"\nconfig: {source: redis}\ncluster: {redis: \"x:1\"}\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if a.Config.LocalCopy != "/var/lib/tollgate/config-copy-edge_1_a.yaml" || a.Config.LocalCopy == b.Config.LocalCopy ||
		!strings.HasSuffix(b.Config.LocalCopy, "_8082.yaml") {
		t.Fatalf("local copies %q and %q", a.Config.LocalCopy, b.Config.LocalCopy)
	}
}
