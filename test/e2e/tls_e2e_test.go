//go:build e2e

package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// tlsProc is the binary with a TLS listener (certificate api.test, "v1",
// by the CA) before an upstream.
type tlsProc struct {
	up      *testutil.Upstream
	dir     string
	ca      *testutil.TestCA
	tlsAddr string
	p       *proc
}

func startTLSProc(t *testing.T) *tlsProc {
	t.Helper()
	up := testutil.StartUpstream(t, "up")
	dir := t.TempDir()
	ca := testutil.NewTestCA(t)
	cert, key := ca.Issue(t, dir, "api", "v1", "api.test")
	tlsAddr := freePort(t)
	cfg := writeConfig(t, `
tls:
  listen: "`+tlsAddr+`"
  certs:
    - {cert: "`+cert+`", key: "`+key+`"}
services:
  up:
    instances: [{addr: "`+up.Addr+`"}]
routes:
  - name: all
    match: {prefix: /}
    service: up
`)
	p := startProc(t, "", "", nil, "run", "-c", cfg)
	return &tlsProc{up: up, dir: dir, ca: ca, tlsAddr: tlsAddr, p: p}
}

// TestTLSListenerAndCertificateReload: the binary serves the routes over
// TLS (HTTP/1.1 and h2) beside cleartext, marks such requests https
// upstream, refuses TLS 1.1, and on SIGHUP serves a replaced certificate to new connections
// while a connection made before keeps working.
func TestTLSListenerAndCertificateReload(t *testing.T) {
	e := startTLSProc(t)
	up, dir, ca, tlsAddr, p := e.up, e.dir, e.ca, e.tlsAddr, e.p

	client := func() *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{ServerName: "api.test", RootCAs: ca.Pool()}, ForceAttemptHTTP2: false,
		}}
	}
	fetch := func(c *http.Client) (*http.Response, string) {
		t.Helper()
		var resp *http.Response
		var err error
		for try := 0; try < 50; try++ { // the TLS listener starts with the cleartext one
			if resp, err = c.Get("https://" + tlsAddr + "/hello"); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	old := client()
	resp, body := fetch(old)
	if resp.StatusCode != 200 || resp.TLS.PeerCertificates[0].Subject.Organization[0] != "v1" {
		t.Fatalf("https: %d %s", resp.StatusCode, body)
	}
	if got := up.Last().Headers["X-Forwarded-Proto"]; got != "https" {
		t.Fatalf("the upstream saw X-Forwarded-Proto %q, want https", got)
	}
	// The same route over HTTP/2 (h2 is offered by default).
	h2c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: "api.test", RootCAs: ca.Pool()}, ForceAttemptHTTP2: true,
	}}
	if resp, body := fetch(h2c); resp.StatusCode != 200 || resp.ProtoMajor != 2 || body != "up" {
		t.Fatalf("h2: %s %d %q", resp.Proto, resp.StatusCode, body)
	}
	if got := up.Last().Headers["X-Forwarded-Proto"]; got != "https" {
		t.Fatalf("over h2 the upstream saw X-Forwarded-Proto %q, want https", got)
	}
	if status, _ := testutil.Get(t, "http://"+p.addr+"/hello"); status != 200 {
		t.Fatalf("cleartext beside TLS: %d", status)
	}
	if _, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: "api.test", RootCAs: ca.Pool(),
		MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil || strings.Contains(err.Error(), "no supported versions") {
		t.Fatal("TLS 1.1 accepted")
	}

	ca.Issue(t, dir, "api", "v2", "api.test")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := fetch(client())
		if resp.TLS.PeerCertificates[0].Subject.Organization[0] == "v2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replaced certificate was not served within 5s of SIGHUP")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if resp, _ := fetch(h2c); resp.ProtoMajor != 2 || resp.TLS.PeerCertificates[0].Subject.Organization[0] != "v1" {
		t.Fatalf("the h2 connection made before the reload: %s, certificate %s", resp.Proto, resp.TLS.PeerCertificates[0].Subject.Organization[0])
	}
	resp, _ = fetch(old) // the keep-alive connection made before the reload
	if resp.StatusCode != 200 || resp.TLS.PeerCertificates[0].Subject.Organization[0] != "v1" {
		t.Fatalf("the connection made before the reload: %d, certificate %s", resp.StatusCode, resp.TLS.PeerCertificates[0].Subject.Organization[0])
	}
}

// TestHTTP2RapidResetFlood (CVE-2023-44487) against the binary: twice,
// eight connections each open and reset 20,000 streams at once; every one
// is cut off, the gateway's RSS stays bounded (the second flood adds next
// to nothing), the refusals show in /admin/stats, and an h2 client is
// served afterwards.
func TestHTTP2RapidResetFlood(t *testing.T) {
	e := startTLSProc(t)
	up, ca, tlsAddr, p := e.up, e.ca, e.tlsAddr, e.p
	conf := &tls.Config{ServerName: "api.test", RootCAs: ca.Pool()}
	h2c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true}}
	fetch := func() *http.Response {
		t.Helper()
		var resp *http.Response
		var err error
		for try := 0; try < 50; try++ {
			if resp, err = h2c.Get("https://" + tlsAddr + "/hello"); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := fetch(); resp.ProtoMajor != 2 {
		t.Fatalf("not h2: %s", resp.Proto)
	}
	const conns, streams = 8, 20_000
	flood := func() (total int) {
		type result struct {
			sent int
			cut  bool
			err  error
		}
		results := make(chan result, conns)
		for range conns {
			go func() {
				sent, cut, err := testutil.H2RapidReset(tlsAddr, conf, "api.test", "/flood", streams)
				results <- result{sent, cut, err}
			}()
		}
		for range conns {
			r := <-results
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !r.cut {
				t.Fatalf("a flooding connection was not cut off after %d streams", r.sent)
			}
			total += r.sent
		}
		return total
	}
	// Bounded: a second flood as large as the first adds next to nothing
	// (the first one grows the heap to its working size). Under the race
	// detector the gateway is slower, so more streams start before the
	// cut, and every goroutine that ran keeps shadow memory: only a loose
	// bound holds there (the server package's flood test bounds the heap
	// under -race too).
	grow, again := int64(64<<20), int64(24<<20)
	if raceEnabled {
		grow, again = 1<<30, 512<<20
	}
	goroutines := func() int {
		_, body := testutil.Get(t, "http://"+p.admin+"/debug/goroutines")
		n, err := strconv.Atoi(strings.TrimSpace(body))
		if err != nil {
			t.Fatalf("/debug/goroutines: %q", body)
		}
		return n
	}
	g0 := goroutines()
	rss0 := rssOf(t, p.cmd.Process.Pid)
	sent := flood()
	rss1 := rssOf(t, p.cmd.Process.Pid)
	sent += flood()
	rss2 := rssOf(t, p.cmd.Process.Pid)
	reached := len(up.Seen()) - 1
	t.Logf("%d reset streams on %d connections; %d reached the backend; RSS %.1f → %.1f → %.1f MB",
		sent, 2*conns, reached, float64(rss0)/(1<<20), float64(rss1)/(1<<20), float64(rss2)/(1<<20))
	if rss1-rss0 > grow || rss2-rss1 > again {
		t.Fatalf("RSS grew %d MB, then %d MB", (rss1-rss0)>>20, (rss2-rss1)>>20)
	}
	if reached > 2*conns*500 {
		t.Fatalf("%d reset streams reached the backend", reached)
	}
	// Nothing of the floods stays running.
	deadline := time.Now().Add(5 * time.Second)
	for g := goroutines(); g > g0+10; g = goroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the floods, %d before", g, g0)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp := fetch(); resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("after the flood: %s %d", resp.Proto, resp.StatusCode)
	}
	_, stats := testutil.Get(t, "http://"+p.admin+"/admin/stats")
	if !strings.Contains(stats, `"early_resets"`) && !strings.Contains(stats, `too_many_early_resets`) {
		t.Fatalf("/admin/stats shows no refusal: %s", stats)
	}
}
