package file_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/upstream"
)

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestThousandInstancesChangingTenTimesASecond: 100 services of 10
// instances each, one of them changing every 100 ms. Every change
// reaches its service, and the process's CPU and heap while it runs are
// reported (the request path's cost is BenchmarkServicePick in upstream).
func TestThousandInstancesChangingTenTimesASecond(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 8 s")
	}
	const services, each = 100, 10
	dir := t.TempDir()
	set := func(svc, gen int) string {
		var b strings.Builder
		b.WriteString("[")
		for i := range each {
			fmt.Fprintf(&b, "{addr: \"127.0.%d.%d:%d\", meta: {version: v%d}},", svc, i, 20000+gen, gen%2)
		}
		return b.String() + "]"
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "discovery:\n  cache_dir: %s/saved\n  file: {interval: 100ms}\nservices:\n", dir)
	for s := range services {
		path := filepath.Join(dir, fmt.Sprintf("s%d.yaml", s))
		if err := os.WriteFile(path, []byte(set(s, 0)), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "  s%d: {discover: {from: file, name: %s}}\n", s, path)
	}
	cfg.WriteString("routes: []\n")
	// The same services with their instances written in the file: what
	// the heap holds beyond them is the watching's.
	written := regexpDiscover.ReplaceAllStringFunc(cfg.String(), func(m string) string {
		var s int
		fmt.Sscanf(m, "  s%d:", &s)
		return fmt.Sprintf("  s%d: {instances: %s}", s, regexpMeta.ReplaceAllString(set(s, 0), ""))
	})
	heapBefore := heapInUse()
	_, writtenSnap := compile(t, written)
	heapWritten := heapInUse()
	_, snap := compile(t, cfg.String())
	for name, svc := range upstream.ServicesOf(snap.Env()) {
		if len(svc.Instances()) != each {
			t.Fatalf("%s has %d instances at start", name, len(svc.Instances()))
		}
	}
	heapWatching := heapInUse()
	runtime.KeepAlive(writtenSnap)

	idleStart, idleCPU := time.Now(), cpuTime(t)
	time.Sleep(2 * time.Second)
	idle := float64(cpuTime(t)-idleCPU) / float64(time.Since(idleStart))

	gen := map[int]int{}
	start, startCPU := time.Now(), cpuTime(t)
	changes := 0
	for tick := time.NewTicker(100 * time.Millisecond); time.Since(start) < 5*time.Second; <-tick.C {
		s := changes % services
		gen[s]++
		path := filepath.Join(dir, fmt.Sprintf("s%d.yaml", s))
		if err := os.WriteFile(path+".tmp", []byte(set(s, gen[s])), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
		changes++
	}
	testutil.Eventually(t, 5*time.Second, "every change reached its service", func() bool {
		for s, g := range gen {
			want := fmt.Sprintf(":%d", 20000+g)
			for _, in := range upstream.ServicesOf(snap.Env())[fmt.Sprintf("s%d", s)].Instances() {
				if !strings.HasSuffix(in.Addr, want) {
					return false
				}
			}
		}
		return true
	})
	elapsed := time.Since(start)
	busy := float64(cpuTime(t)-startCPU) / float64(elapsed)
	t.Logf("%d services × %d instances: watching costs %.2f%% of a core idle (100 files looked at every 100 ms), "+
		"%.2f%% while %d changes were applied in %v (%.1f/s); the discovered configuration holds %.1f MiB of heap; %d goroutines",
		services, each, 100*idle, 100*busy, changes, elapsed.Round(time.Millisecond), float64(changes)/elapsed.Seconds(),
		float64(heapWatching-min(heapWatching, heapWritten))/(1<<20), runtime.NumGoroutine())
	t.Logf("the same configuration with the instances written in it holds %.1f MiB", float64(heapWritten-min(heapWritten, heapBefore))/(1<<20))
	runtime.KeepAlive(writtenSnap)
}

var regexpMeta = regexp.MustCompile(`, meta: \{[^}]*\}`)

var regexpDiscover = regexp.MustCompile(`  s\d+: \{discover: \{[^}]*\}\}`)

func compile(t *testing.T, text string) (*config.Compiler, *config.Snapshot) {
	t.Helper()
	f, err := config.Parse("scale.yaml", []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	comp := config.NewCompiler()
	t.Cleanup(comp.Close)
	snap, err := comp.Compile(f, "scale.yaml")
	if err != nil {
		t.Fatal(err)
	}
	comp.Release(snap)
	return comp, snap
}
