//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestQuickStart runs docs/quickstart.md as written: its sh blocks, in
// order, in one shell at the repository's root, and checks that the
// output of each block shows the text block that follows it (its lines in
// order, others may come between; "…" in a line stands for anything). So
// the page a newcomer follows and the gateway cannot drift apart.
func TestQuickStart(t *testing.T) {
	t.Parallel() // it mostly waits (for traffic, a registry, processes): beside the others
	for _, tool := range []string{"make", "curl", "redis-server", "redis-cli"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s missing: run make test-deps", tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "quickstart.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := quickStartSteps(string(doc))
	if len(steps) < 8 {
		t.Fatalf("the quick start has %d command blocks", len(steps))
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for i, s := range steps {
		script.WriteString("echo '@@step " + strconv.Itoa(i) + "'\n")
		script.WriteString(s.commands)
	}
	script.WriteString("echo '@@end'\n")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TOLLGATE_ADMIN_TOKEN=", "TOLLGATE_CONFIG=", "TOLLGATE_REDIS=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t.Cleanup(func() {
		// What the page starts in the background, if it stopped half way;
		// Redis detached itself (--daemonize), so it is asked to go.
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		}
		_ = exec.Command("redis-cli", "-p", "6390", "shutdown", "nosave").Run()
	})
	runErr := cmd.Run()
	outputs := strings.Split(out.String(), "@@step ")
	if runErr != nil || !strings.Contains(out.String(), "@@end") {
		t.Fatalf("the quick start stopped (%v); output:\n%s\n%s", runErr, out.String(), quickStartLogs(root))
	}
	for i, s := range steps {
		if s.expect == "" {
			continue
		}
		got := ""
		if i+1 < len(outputs) {
			got = outputs[i+1]
			got = got[strings.IndexByte(got, '\n')+1:]
		}
		if missing := showsLines(got, s.expect); missing != "" {
			t.Errorf("step %d (%s): the output does not show %q\ncommands:\n%s\noutput:\n%s", i, s.title, missing, s.commands, got)
		}
	}
	if t.Failed() {
		t.Log(quickStartLogs(root))
	}
}

type quickStartStep struct {
	title    string // the section it is in
	commands string // an sh block
	expect   string // the text block after it, if any
}

var quickStartBlock = regexp.MustCompile("(?s)```(sh|text)\n(.*?)```")

// quickStartSteps reads the sh blocks of doc and the text block that
// follows each (before the next sh block).
func quickStartSteps(doc string) []quickStartStep {
	var steps []quickStartStep
	for _, m := range quickStartBlock.FindAllStringSubmatchIndex(doc, -1) {
		kind, body := doc[m[2]:m[3]], doc[m[4]:m[5]]
		if kind == "sh" {
			title := doc[:m[0]]
			title = title[strings.LastIndex(title, "\n## ")+1:]
			title, _, _ = strings.Cut(title, "\n")
			steps = append(steps, quickStartStep{title: title, commands: body})
		} else if len(steps) > 0 && steps[len(steps)-1].expect == "" {
			steps[len(steps)-1].expect = body
		}
	}
	return steps
}

// showsLines reports the first line of want that out does not show after
// the lines before it, or "" when it shows them all.
func showsLines(out, want string) string {
	lines := strings.Split(out, "\n")
	at := 0
	for _, w := range strings.Split(strings.TrimRight(want, "\n"), "\n") {
		parts := strings.Split(strings.TrimRight(w, " "), "…")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		for at < len(lines) && !re.MatchString(strings.TrimRight(lines[at], " \r")) {
			at++
		}
		if at == len(lines) {
			return w
		}
		at++
	}
	return ""
}

func quickStartLogs(root string) string {
	var b strings.Builder
	for _, name := range []string{"upstream.log", "gateway.log", "node-a.log", "node-b.log"} {
		body, err := os.ReadFile(filepath.Join(root, "quickstart", name))
		if err != nil {
			continue
		}
		if len(body) > 4000 {
			body = body[len(body)-4000:]
		}
		b.WriteString("--- quickstart/" + name + " (end)\n" + string(body) + "\n")
	}
	return b.String()
}
