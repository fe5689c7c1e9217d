package config

import (
	"os"
	"path/filepath"
	"testing"
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
