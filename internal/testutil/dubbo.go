package testutil

import (
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
}

// dubboProviderStartWait covers dubbo-go's start-up under the race
// detector on a busy machine.
const dubboProviderStartWait = 30 * time.Second

var dubboProviderBuild struct {
	once sync.Once
	bin  string
	err  error
}

// DubboProviderBinary builds the provider once per test process (its
// module is separate, so the gateway's go.mod does not carry dubbo-go).
func DubboProviderBinary(t testing.TB) string {
	t.Helper()
	b := &dubboProviderBuild
	b.once.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(here), "..", "..", "test", "dubboprovider")
		dir, err := os.MkdirTemp("", "dubboprovider")
		if err != nil {
			b.err = err
			return
		}
		b.bin = filepath.Join(dir, "dubboprovider")
		cmd := exec.Command("go", "build", "-o", b.bin, ".")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building test/dubboprovider: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// StartDubboProvider starts a provider whose hang method takes hang; it
// is killed at the test's end.
func StartDubboProvider(t testing.TB, hang time.Duration) *DubboProvider {
	t.Helper()
	p := &DubboProvider{Hang: hang, serverProcess: serverProcess{t: t, name: "dubboprovider"},
		bin: DubboProviderBinary(t), dir: t.TempDir()}
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
	cmd := exec.Command(p.bin, "-port", strconv.Itoa(p.port), "-hang", p.Hang.String())
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
