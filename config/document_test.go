package config

import (
	"strings"
	"testing"
)

func TestPlainSecretsRefusesClearText(t *testing.T) {
	doc := `
consumers:
  - {app_key: a, secret: ${A_SECRET}}
  - {app_key: b, secret: "0123456789abcdef-in-clear"}
  - {app_key: c, secret_file: /etc/tollgate/c}
jwt:
  keys:
    - {kid: k1, alg: HS256, secret: hunter2hunter2hunter2}
    - {kid: k2, alg: HS256, secret: "${JWT_K2}"}
`
	errs := PlainSecrets("push.yaml", []byte(doc))
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`push.yaml:4:26: consumers[1].secret is written in clear; use ${NAME} (each node's environment) or secret_file`,
		`push.yaml:8:37: jwt.keys[0].secret is written in clear; use ${NAME} (each node's environment) or secret_file`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckDocumentAsANodeWould(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	good := "cluster: {redis: \"\"}\nconfig: {source: redis}\nconsumers:\n  - {app_key: a, secret_file: /nonexistent/secret}\nroutes:\n  - {name: m, match: {path: /m}, mock: {responses: [{status: 200}]}}\n"
	notes, err := CheckDocument("doc.yaml", []byte(good), noEnv)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "/nonexistent/secret") {
		t.Fatalf("good document: notes %q, err %v", notes, err)
	}
	bad := "routes:\n  - {name: m, match: {path: /m}, mock: {responses: [{status: 200}]}, prioritee: 1}\n"
	if _, err := CheckDocument("doc.yaml", []byte(bad), noEnv); err == nil || !strings.HasPrefix(err.Error(), "doc.yaml:2:") {
		t.Fatalf("bad document: %v", err)
	}
}

func TestOverlayKeepsTheNodesOwnSettings(t *testing.T) {
	pushed := &File{Listen: ":1", NodeID: "from-doc", LogLevel: "debug", Cluster: Cluster{Nodes: "5"}, DefaultService: "svc"}
	boot := &File{Listen: ":2", NodeID: "node-a", LogLevel: "info", Cluster: Cluster{Redis: "r:6379"}, Config: Source{Source: "redis"}}
	overlay(pushed, boot, map[string]bool{"listen": true, "node_id": true})
	if pushed.Listen != ":2" || pushed.NodeID != "node-a" || pushed.LogLevel != "debug" ||
		pushed.Cluster.Redis != "r:6379" || pushed.Cluster.Nodes != "" || !pushed.Config.FromRedis() || pushed.DefaultService != "svc" {
		t.Fatalf("overlaid %+v", pushed)
	}
}

// TestPlainSecretsSeesThroughYAML: the check judges decoded values, so
// anchors, aliases, merges, text around a reference and a value written to
// look like the internal marker all count as clear.
func TestPlainSecretsSeesThroughYAML(t *testing.T) {
	for name, doc := range map[string]string{
		"alias item":     "not_found: {headers: &b {app_key: k1, secret: CLEAR}}\nconsumers: [*b]\n",
		"alias value":    "not_found: {body: &s CLEAR}\nconsumers:\n  - {app_key: k1, secret: *s}\n",
		"marker-like":    "not_found: {body: &tollgate-env-ref-X CLEAR}\nconsumers:\n  - {app_key: k1, secret: *tollgate-env-ref-X}\n",
		"text after ref": "consumers:\n  - {app_key: k1, secret: ${HOME}CLEAR}\n",
		"two refs":       "consumers:\n  - {app_key: k1, secret: ${A}${B}}\n",
		"admin token":    "admin: {token: CLEARTOKEN}\n",
		"redis password": "cluster: {password: CLEARPASS}\n",
		"block scalar":   "consumers:\n  - app_key: k1\n    secret: |\n      CLEAR\n",
	} {
		t.Run(name, func(t *testing.T) {
			if errs := PlainSecrets("push.yaml", []byte(doc)); len(errs) != 1 {
				t.Fatalf("%d findings, want 1: %v", len(errs), errs)
			}
		})
	}
	if errs := PlainSecrets("push.yaml", []byte("consumers:\n  - {app_key: k1, secret: \"${K1}\"}\nadmin: {token: ${TOKEN}}\n")); len(errs) != 0 {
		t.Fatalf("references refused: %v", errs)
	}
}
