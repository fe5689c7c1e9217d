package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// tlsConfig is a gateway with a TLS listener on a port the kernel
// chooses; extra lines go into its tls section.
func tlsConfig(t *testing.T, path, cert, key, extra string) {
	t.Helper()
	text := "listen: \"127.0.0.1:0\"\nwatch: false\nshutdown_timeout: 5s\ndrain_delay: 0s\naccess_log: {path: off}\nadmin: {listen: off}\n" +
		"tls:\n  listen: \"127.0.0.1:0\"\n  certs: [{cert: \"" + cert + "\", key: \"" + key + "\"}]\n" + extra
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startObservedProcess is startTestProcess with the process's log kept
// for the test to read.
func startObservedProcess(t *testing.T, cfg string) (*process, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	p, err := startProcess(cfg, zap.New(core), zap.NewAtomicLevel())
	if err != nil {
		t.Fatal(err)
	}
	p.serve()
	sigs, stopped := make(chan os.Signal, 2), make(chan struct{})
	go func() {
		_ = p.wait(sigs)
		close(stopped)
	}()
	t.Cleanup(func() {
		sigs <- syscall.SIGTERM
		sigs <- syscall.SIGTERM // and no drain delay
		<-stopped
		p.close()
	})
	return p, logs
}

// handshake connects to the TLS listener offering TLS up to maxVersion
// and h2 then http/1.1; it returns the protocol chosen.
func handshake(t *testing.T, addr string, ca *testutil.TestCA, maxVersion uint16) (string, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "api.test", RootCAs: ca.Pool(), MaxVersion: maxVersion,
		NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().NegotiatedProtocol, nil
}

// TestProcessTLSListenerFromTheSection: the process opens the TLS
// listener the tls section describes (its minimum version, its
// protocols), and a reload that changes the section is applied except
// for it: the listener keeps its settings and the log says a restart is
// needed.
func TestProcessTLSListenerFromTheSection(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewTestCA(t)
	cert, key := ca.Issue(t, dir, "api", "A", "api.test")
	cfg := filepath.Join(dir, "tollgate.yaml")

	tlsConfig(t, cfg, cert, key, "  min_version: \"1.3\"\n  alpn: [http/1.1]\n")
	strict, _ := startObservedProcess(t, cfg)
	if _, err := handshake(t, strict.secure.ln.Addr().String(), ca, tls.VersionTLS12); err == nil {
		t.Fatal("min_version 1.3: a TLS 1.2 client was let in")
	}
	if proto, err := handshake(t, strict.secure.ln.Addr().String(), ca, tls.VersionTLS13); err != nil || proto != "http/1.1" {
		t.Fatalf("alpn [http/1.1]: %q, %v", proto, err)
	}

	tlsConfig(t, cfg, cert, key, "")
	p, logs := startObservedProcess(t, cfg)
	addr := p.secure.ln.Addr().String()
	if proto, err := handshake(t, addr, ca, tls.VersionTLS12); err != nil || proto != "h2" {
		t.Fatalf("the defaults (TLS 1.2, h2 first): %q, %v", proto, err)
	}
	tlsConfig(t, cfg, cert, key, "  min_version: \"1.3\"\n")
	if _, err := p.reload("test"); err != nil {
		t.Fatal(err)
	}
	warned := logs.FilterMessageSnippet("take effect only after a restart").All()
	if len(warned) != 1 {
		t.Fatalf("%d restart warnings after changing the tls section", len(warned))
	}
	if got, _ := warned[0].ContextMap()["settings"].([]any); !slices.Equal(got, []any{"tls"}) {
		t.Fatalf("restart warning names %v, want [tls]", warned[0].ContextMap()["settings"])
	}
	if _, err := handshake(t, addr, ca, tls.VersionTLS12); err != nil {
		t.Fatalf("after the reload the running listener changed its minimum version: %v", err)
	}
}
