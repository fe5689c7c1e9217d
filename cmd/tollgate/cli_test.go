package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/testutil"
	"go.uber.org/zap"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = mainWithArgs(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestEveryCommandAnswersHelp: -h, --help and `help CMD` print the
// command's own usage, its flags included, on stdout with exit code 0.
func TestEveryCommandAnswersHelp(t *testing.T) {
	ownFlags := map[string][]string{
		"run":             {"-c FILE"},
		"sign":            {"--app-key", "--curl"},
		"replay":          {"--target"},
		"config push":     {"-redis", "-allow-plain-secrets", "-author", "-keep"},
		"config status":   {"-redis"},
		"config show":     {"-redis"},
		"config rollback": {"-redis", "-to VERSION"},
	}
	names := []string{"config push", "config status", "config show", "config rollback"}
	for _, c := range subcommands() {
		names = append(names, c.name)
	}
	for _, name := range names {
		words := strings.Fields(name)
		for _, args := range [][]string{
			append(append([]string(nil), words...), "--help"),
			append(append([]string(nil), words...), "-h"),
			append([]string{"help"}, words...),
		} {
			code, out, errOut := runCLI(args...)
			if code != 0 || errOut != "" {
				t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
			}
			if !strings.HasPrefix(out, "Usage: tollgate "+name) && !(name == "run" && strings.HasPrefix(out, "Usage: tollgate [run]")) {
				t.Errorf("%q: stdout does not start with its usage:\n%s", args, out)
			}
			if _, rest, _ := strings.Cut(out, "\n\n"); strings.TrimSpace(strings.Split(rest, "\n")[0]) == "" {
				t.Errorf("%q: no description under the usage line:\n%s", args, out)
			}
			for _, f := range ownFlags[name] {
				if !strings.Contains(out, f) {
					t.Errorf("%q: usage does not list %s:\n%s", args, f, out)
				}
			}
		}
	}
	// Each config command lists only its own flags.
	if _, out, _ := runCLI("config", "status", "--help"); strings.Contains(out, "-to") || strings.Contains(out, "-keep") {
		t.Errorf("config status lists another command's flags:\n%s", out)
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"config", "--help"}} {
		if code, out, errOut := runCLI(args...); code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: tollgate") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// TestUnknownFlagsPrintTheCommandsUsage: a flag a command does not have
// is named, with that command's usage, on stderr; exit code 2.
func TestUnknownFlagsPrintTheCommandsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--bogus"}, {"validate", "--bogus", "x.yaml"}, {"version", "--bogus"},
		{"config", "show", "--bogus"}, {"config", "push", "x.yaml", "--bogus"},
		{"sign", "--bogus"}, {"replay", "--bogus"}, {"help", "--bogus"},
	} {
		code, out, errOut := runCLI(args...)
		name := args[0]
		if name == "config" {
			name += " " + args[1]
		}
		if code != 2 || out != "" || !strings.Contains(errOut, "bogus") || !strings.Contains(errOut, "Usage: tollgate ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		if name != "run" && !strings.Contains(errOut, "Usage: tollgate "+name) {
			t.Errorf("%q: stderr is not %s's usage:\n%s", args, name, errOut)
		}
	}
	for _, args := range [][]string{{"nonsense"}, {"config"}, {"config", "nonsense"}, {"help", "nonsense"}} {
		if code, _, errOut := runCLI(args...); code != 2 || !strings.Contains(errOut, "Usage: tollgate") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestFlagsAfterArguments: flags may follow the arguments, in config as
// in every command (`config show 2 --redis X` once said "give --redis").
func TestFlagsAfterArguments(t *testing.T) {
	rd := testutil.StartRedis(t)
	dir := t.TempDir()
	doc := filepath.Join(dir, "cluster.yaml")
	text := "services:\n  up: {instances: [{addr: \"127.0.0.1:9\"}]}\nroutes:\n  - {name: a, match: {prefix: /}, service: up}\n"
	if err := os.WriteFile(doc, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOLLGATE_REDIS", "")
	if code, out, errOut := runCLI("config", "push", doc, "--redis", rd.Addr, "--author", "test"); code != 0 {
		t.Fatalf("push FILE --redis: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCLI("config", "show", "1", "--redis", rd.Addr)
	if code != 0 || !strings.Contains(out, "name: a") {
		t.Fatalf("show 1 --redis: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI("validate", doc); code != 0 {
		t.Fatalf("validate FILE: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI("config", "show", "1"); code != 2 || !strings.Contains(errOut, "give --redis") {
		t.Fatalf("show without --redis: exit %d, %s", code, errOut)
	}
}

// TestValidateAndRunReadANodeFileAlike: a node file following Redis, its
// token a reference in a flow mapping, is accepted by validate and by
// run's start alike; with the variable unset both refuse it with the same
// located message (run once failed with a yaml error naming no file while
// validate accepted the file).
func TestValidateAndRunReadANodeFileAlike(t *testing.T) {
	rd := testutil.StartRedis(t)
	dir := t.TempDir()
	node := filepath.Join(dir, "node.yaml")
	text := "config: {source: redis, local_copy: " + filepath.Join(dir, "copy.yaml") + "}\n" +
		"admin: {listen: \"127.0.0.1:0\", token: ${TOLLGATE_ADMIN_TOKEN}}\n" +
		"cluster: {redis: \"" + rd.Addr + "\"}\n" +
		"listen: \"127.0.0.1:0\"\n"
	if err := os.WriteFile(node, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOLLGATE_ADMIN_TOKEN", "a-long-enough-admin-token")
	if code, out, errOut := runCLI("validate", node); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("validate: exit %d\n%s%s", code, out, errOut)
	}
	c := config.NewCompiler()
	defer c.Close()
	fw, err := redisFollower(c, node, os.LookupEnv)
	if err != nil || fw == nil {
		t.Fatalf("run's follower: %v %v", fw, err)
	}
	fw.Cluster().Close()

	os.Unsetenv("TOLLGATE_ADMIN_TOKEN")
	want := node + ":2:39: ${TOLLGATE_ADMIN_TOKEN} is not set in the environment"
	code, _, errOut := runCLI("validate", node)
	if code != 1 || !strings.HasPrefix(errOut, want) {
		t.Fatalf("validate without the variable: exit %d, %q; want %q", code, errOut, want)
	}
	_, err = startProcess(node, zap.NewNop(), zap.NewAtomicLevel())
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("run without the variable: %v; want %q", err, want)
	}
}
