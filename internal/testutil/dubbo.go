package testutil

import (
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// DubboProvider is a Dubbo provider (test/dubboprovider, built with
// dubbo-go) the test started on a free loopback port: it serves
// com.shop.OrderService, version 1.0.0, group g1, over the Dubbo 2
// protocol with hessian2 — getOrder(String), findOrders(OrderQuery),
// fail(String) which throws, and hang(String) which answers after Hang.
type DubboProvider struct {
	Addr string
	// Hang is how long the hang method takes.
	Hang time.Duration

	serverProcess

	bin  string
	port int
	dir  string
	// triple, when set, is the descriptor set of shop.v1.Orders: the
	// provider then serves that over Triple instead.
	triple string
}

// dubboProviderStartWait covers dubbo-go's start-up under the race
// detector on a busy machine.
const dubboProviderStartWait = 30 * time.Second

var dubboProviderBuild struct {
	once sync.Once
	bin  string
	err  error
}

// DubboProviderBinary builds the provider (its module is separate, so the
// gateway's go.mod does not carry dubbo-go). Linking it takes seconds, so
// the binary is kept in the temporary directory under a hash of its
// sources and reused by later test processes until they change.
func DubboProviderBinary(t testing.TB) string {
	t.Helper()
	b := &dubboProviderBuild
	b.once.Do(func() { b.bin, b.err = buildDubboProvider() })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

func buildDubboProvider() (string, error) {
	_, here, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(here), "..", "..", "test", "dubboprovider")
	h := sha256.New()
	for _, name := range []string{"main.go", "triple.go", "go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return "", err
		}
		h.Write(data)
	}
	bin := filepath.Join(os.TempDir(), fmt.Sprintf("tollgate-dubboprovider-%x", h.Sum(nil)[:8]))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	// Built under another name and renamed: a process running beside
	// this one never sees half a binary.
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building test/dubboprovider: %v\n%s", err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// StartDubboProvider starts a provider whose hang method takes hang; it
// is killed at the test's end.
func StartDubboProvider(t testing.TB, hang time.Duration) *DubboProvider {
	t.Helper()
	return startDubboProvider(t, hang, "")
}

// StartTripleProvider starts the provider serving shop.v1.Orders/Create
// (the order service of the gRPC tests: its descriptor set at
// descriptors) over Dubbo 3's Triple protocol, which speaks gRPC.
func StartTripleProvider(t testing.TB, descriptors string) *DubboProvider {
	t.Helper()
	return startDubboProvider(t, 0, descriptors)
}

func startDubboProvider(t testing.TB, hang time.Duration, triple string) *DubboProvider {
	t.Helper()
	p := &DubboProvider{Hang: hang, serverProcess: serverProcess{t: t, name: "dubboprovider"},
		bin: DubboProviderBinary(t), dir: t.TempDir(), triple: triple}
	p.serverProcess.start, p.where = p.start, func() string { return p.Addr }
	t.Cleanup(p.Kill)
	var lastErr error
	for range 5 {
		p.port = freePort(t)
		p.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
		if lastErr = p.start(); lastErr == nil {
			return p
		}
	}
	t.Fatalf("starting dubboprovider: %v", lastErr)
	return nil
}

func (p *DubboProvider) start() error {
	logFile := filepath.Join(p.dir, "provider.log")
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(p.bin, "-port", strconv.Itoa(p.port), "-hang", p.Hang.String(), "-triple", p.triple)
	cmd.Dir, cmd.Stdout, cmd.Stderr = p.dir, out, out
	done, err := p.run(cmd)
	if err != nil {
		return err
	}
	return p.awaitReady(done, logFile, dubboProviderStartWait, func() bool {
		c, err := net.DialTimeout("tcp", p.Addr, 100*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}
