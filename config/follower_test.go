package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// TestFollowerReportsAVersionOnceItServes: Load compiles the newest version
// but the node still serves the one before until the caller swaps the
// snapshot in. Until Swapped, Status names the version serving and the
// local copy holds it: a status that ran ahead sent a client to a route
// the node did not have yet (a 404 seen on a loaded host between the
// status and the swap).
func TestFollowerReportsAVersionOnceItServes(t *testing.T) {
	rd := testutil.StartRedis(t)
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "copy.yaml")
	boot := filepath.Join(dir, "boot.yaml")
	if err := os.WriteFile(boot, []byte("config: {source: redis, local_copy: "+copyPath+"}\ncluster: {redis: \""+rd.Addr+"\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := NewCompiler()
	defer c.Close()
	fw, err := NewFollower(c, boot, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	push := func(route string) uint64 {
		text := "services:\n  up: {instances: [{addr: \"127.0.0.1:9\"}]}\nroutes:\n  - {name: " + route + ", match: {prefix: /" + route + "/}, service: up}\n"
		d := StoredConfig{StoredVersion: StoredVersion{Digest: digestOf([]byte(text))}, Author: "test", At: time.Now(), Text: []byte(text)}
		v, err := NewStore(fw.Cluster()).Push(context.Background(), d, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	loadNewest := func(want uint64) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for {
			_, err := fw.Load()
			fw.mu.Lock()
			got := fw.loaded.Version
			fw.mu.Unlock()
			if err == nil && got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Load: version %d, %v; want %d", got, err, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	v1 := push("one")
	if _, err := fw.Start(); err != nil {
		t.Fatal(err)
	}
	if st := fw.Status(); st.Version != v1 || st.From != "redis" {
		t.Fatalf("after Start: %+v, want version %d from redis", st, v1)
	}
	v2 := push("two")
	loadNewest(v2)
	if st := fw.Status(); st.Version != v1 {
		t.Fatalf("loaded, not swapped in: status names version %d, want %d (still serving)", st.Version, v1)
	}
	if data, _ := os.ReadFile(copyPath); !strings.Contains(string(data), "/one/") || strings.Contains(string(data), "/two/") {
		t.Fatalf("loaded, not swapped in: the local copy already holds the new version:\n%s", data)
	}
	fw.Swapped()
	if st := fw.Status(); st.Version != v2 {
		t.Fatalf("swapped in: status names version %d, want %d", st.Version, v2)
	}
	if data, _ := os.ReadFile(copyPath); !strings.Contains(string(data), "/two/") {
		t.Fatalf("swapped in: the local copy does not hold it:\n%s", data)
	}
	fw.Swapped() // nothing loaded since: no change
	if st := fw.Status(); st.Version != v2 {
		t.Fatalf("a second Swapped changed the status: %+v", st)
	}
}

// TestFollowerExpandsOnlySecretFields: the node's own file may refer to its
// environment anywhere; a version from Redis and the local copy of one
// only in secret fields. A refused version's error, in the status and from
// Start, names the reference, never the value.
func TestFollowerExpandsOnlySecretFields(t *testing.T) {
	rd := testutil.StartRedis(t)
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "copy.yaml")
	boot := filepath.Join(dir, "boot.yaml")
	if err := os.WriteFile(boot, []byte("config: {source: redis, local_copy: \"${COPY}\"}\ncluster: {redis: \"${REDIS}\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lookup := env(map[string]string{"COPY": copyPath, "REDIS": rd.Addr, "JWT_SECRET": jwtSecret})
	c := NewCompiler()
	defer c.Close()
	fw, err := NewFollower(c, boot, lookup)
	if err != nil {
		t.Fatal(err)
	}
	leaky := upService + "routes:\n  - {name: p, match: {prefix: \"${JWT_SECRET}\"}, service: up}\n"
	// The local copy a node would start on: a version from Redis, judged
	// as one.
	if err := os.WriteFile(copyPath, []byte(copyHeader+"7 "+digestOf([]byte(leaky))+"\n"+leaky), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = fw.Start()
	if err == nil || strings.Contains(err.Error(), jwtSecret) || !strings.Contains(err.Error(), "${JWT_SECRET} is expanded only in a secret field") {
		t.Fatalf("start on a local copy with a reference: %v", err)
	}
	d := StoredConfig{StoredVersion: StoredVersion{Digest: digestOf([]byte(leaky))}, Author: "test", At: time.Now(), Text: []byte(leaky)}
	if _, err := NewStore(fw.Cluster()).Push(context.Background(), d, 10, 0); err != nil {
		t.Fatal(err)
	}
	// Until the client's cache of the current version hears of the push,
	// Load finds no version at all.
	for deadline := time.Now().Add(3 * time.Second); fw.Status().Refused == 0; time.Sleep(20 * time.Millisecond) {
		if _, err := fw.Load(); err == nil {
			t.Fatal("a version with a reference in a prefix was compiled")
		}
		if time.Now().After(deadline) {
			t.Fatal("the version was never refused")
		}
	}
	if st := fw.Status(); st.Refused != 1 || strings.Contains(st.LastError, jwtSecret) || !strings.Contains(st.LastError, "${JWT_SECRET}") {
		t.Fatalf("status: %+v", st)
	}
}
