//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// procCPU is the user and system CPU time a process has used.
func procCPU(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis; utime and
	// stime are the 12th and 13th of them, in clock ticks (100 a second
	// on Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

func procRSSMiB(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	kb, _ := strconv.ParseFloat(string(m[1]), 64)
	return kb / 1024
}

var changesMetric = regexp.MustCompile(`(?m)^tollgate_discovery_changes_total\{[^}]*\} (\d+)$`)

// discoveryChanges sums the set changes every watch of the node took.
func discoveryChanges(t *testing.T, admin string) int {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	total := 0
	for _, m := range changesMetric.FindAllSubmatch(b, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		total += n
	}
	return total
}

// TestDiscoveryScale: 1,000 instances across 100 services in a real etcd,
// 10 changes a second. Every change reaches the gateway; its CPU and
// memory while idle and while the sets change are reported beside a
// gateway with the same instances written in its file.
func TestDiscoveryScale(t *testing.T) {
	t.Parallel() // it mostly waits for the registry: beside the others
	const services, each = 100, 10
	etcd := testutil.StartEtcd(t)
	reg := newEtcdRegistry(t, etcd.Endpoint)
	value := func(addr string) string { return `{"Op":0,"Addr":"` + addr + `","Metadata":{"version":"v1"}}` }
	instance := func(s, i, gen int) string { return fmt.Sprintf("127.0.%d.%d:%d", s, i, 20000+gen) }
	var written, discovered strings.Builder
	fmt.Fprintf(&discovered, "watch: false\ndiscovery:\n  cache_dir: %s\n  etcd: {endpoints: [\"%s\"]}\nservices:\n", t.TempDir(), etcd.Endpoint)
	written.WriteString("watch: false\nservices:\n")
	for s := range services {
		var ops []clientv3.Op
		var list []string
		for i := range each {
			a := instance(s, i, 0)
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/services/s%d/%s", s, a), value(a)))
			list = append(list, `{addr: "`+a+`"}`)
		}
		if _, err := reg.client.Txn(reg.ctx()).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&discovered, "  s%d: {discover: {from: etcd, name: s%d}}\n", s, s)
		fmt.Fprintf(&written, "  s%d: {instances: [%s]}\n", s, strings.Join(list, ", "))
	}
	routes := "routes:\n  - {name: r, match: {prefix: /}, service: s0}\n"

	measure := func(p *proc, d time.Duration) (cpu float64) {
		pid := p.cmd.Process.Pid
		start, c0 := time.Now(), procCPU(t, pid)
		time.Sleep(d)
		return float64(procCPU(t, pid)-c0) / float64(time.Since(start))
	}
	addr, admin := freePort(t), freePort(t)
	static := startProc(t, addr, admin, nil, "run", "-c", writeConfig(t, written.String()+routes))
	time.Sleep(time.Second)
	staticCPU, staticRSS := measure(static, 5*time.Second), procRSSMiB(t, static.cmd.Process.Pid)

	addr, admin = freePort(t), freePort(t)
	p := startProc(t, addr, admin, nil, "run", "-c", writeConfig(t, discovered.String()+routes))
	testutil.Eventually(t, 10*time.Second, "every set known", func() bool { return discoveryChanges(t, admin) >= services })
	time.Sleep(time.Second)
	idleCPU, idleRSS := measure(p, 5*time.Second), procRSSMiB(t, p.cmd.Process.Pid)

	// Ten changes a second: one service at a time gets a new instance in
	// place of an old one, in one transaction.
	before := discoveryChanges(t, admin)
	pid := p.cmd.Process.Pid
	start, c0 := time.Now(), procCPU(t, pid)
	changes := 0
	gen := make([]int, services)
	for tick := time.NewTicker(100 * time.Millisecond); time.Since(start) < 10*time.Second; <-tick.C {
		s := changes % services
		i := (changes / services) % each
		old, next := instance(s, i, gen[s]), instance(s, i, gen[s]+1)
		gen[s]++
		if _, err := reg.client.Txn(reg.ctx()).Then(
			clientv3.OpDelete(fmt.Sprintf("/services/s%d/%s", s, old)),
			clientv3.OpPut(fmt.Sprintf("/services/s%d/%s", s, next), value(next)),
		).Commit(); err != nil {
			t.Fatal(err)
		}
		changes++
	}
	busyCPU := float64(procCPU(t, pid)-c0) / float64(time.Since(start))
	busyRSS := procRSSMiB(t, pid)
	testutil.Eventually(t, 5*time.Second, "every change taken", func() bool { return discoveryChanges(t, admin)-before >= changes })
	t.Logf("%d services × %d instances: same instances written in the file: %.2f%% of a core, RSS %.0f MiB; "+
		"discovered from etcd, idle: %.2f%%, RSS %.0f MiB; while %d changes (10/s) were taken: %.2f%%, RSS %.0f MiB",
		services, each, 100*staticCPU, staticRSS, 100*idleCPU, idleRSS, changes, 100*busyCPU, busyRSS)
}
