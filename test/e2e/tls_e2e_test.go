//go:build e2e

package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// TestTLSListenerAndCertificateReload: the binary serves the routes over
// TLS (HTTP/1.1 and h2) beside cleartext, marks such requests https
// upstream, refuses TLS 1.1, and on SIGHUP serves a replaced certificate to new connections
// while a connection made before keeps working.
func TestTLSListenerAndCertificateReload(t *testing.T) {
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
	if status, _ := get(t, "http://"+p.addr+"/hello"); status != 200 {
		t.Fatalf("cleartext beside TLS: %d", status)
	}
	if _, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: "api.test", RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS11}); err == nil {
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
