package server_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/edgetls"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/server"
	"github.com/valyala/fasthttp"
)

func servedOrg(c *tls.Conn) string {
	return c.ConnectionState().PeerCertificates[0].Subject.Organization[0]
}

func tlsGet(t *testing.T, c *tls.Conn, br *bufio.Reader, path string) *fasthttp.Response {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a.test\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp := &fasthttp.Response{}
	if err := resp.Read(br); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp
}

// TestTLSCertificateBySNI: exact names, a wildcard one label deep, and the
// first certificate for any other name; TLS 1.1 and older refused; the
// request goes upstream marked https.
func TestTLSCertificateBySNI(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := gatewaytest.StartTLS(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind})
			for sni, org := range map[string]string{"a.test": "A", "b.test": "B", "x.wild.test": "W", "A.TEST": "A"} {
				c, err := e.Dial(t, sni, 0)
				if err != nil {
					t.Fatalf("%s: %v", sni, err)
				}
				if got := servedOrg(c); got != org {
					t.Fatalf("SNI %s got certificate %s, want %s", sni, got, org)
				}
			}
			// Names no certificate carries get the first one, which the
			// client then refuses for that name.
			if _, err := e.Dial(t, "deep.x.wild.test", 0); err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("two labels under a wildcard: %v", err)
			}
			if _, err := e.Dial(t, "a.test", tls.VersionTLS11); err == nil || strings.Contains(err.Error(), "no supported versions") {
				t.Fatalf("a TLS 1.1 client: %v, want the server's refusal", err)
			}

			c, err := e.Dial(t, "a.test", 0)
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			if resp := tlsGet(t, c, br, "/x"); resp.StatusCode() != 200 {
				t.Fatalf("status %d", resp.StatusCode())
			}
			last, _ := e.Up.Last()
			if !strings.Contains(last.Head, "\r\nX-Forwarded-Proto: https\r\n") {
				t.Fatalf("upstream head lacks X-Forwarded-Proto: https:\n%s", last.Head)
			}
		})
	}
}

// TestTLSKeepAliveAndPipelining: requests on one TLS connection, one at a
// time with pauses (the connection goes idle between them) and several in
// one write (the later ones are decrypted before the connection would go
// idle, so none is left waiting).
func TestTLSKeepAliveAndPipelining(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := gatewaytest.StartTLS(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind})
			c, err := e.Dial(t, "a.test", 0)
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			for i := range 3 {
				if resp := tlsGet(t, c, br, fmt.Sprintf("/k/%d", i)); resp.StatusCode() != 200 {
					t.Fatalf("status %d", resp.StatusCode())
				}
				time.Sleep(50 * time.Millisecond)
			}
			var batch strings.Builder
			for i := range 5 {
				fmt.Fprintf(&batch, "GET /p/%d HTTP/1.1\r\nHost: a.test\r\n\r\n", i)
			}
			if _, err := c.Write([]byte(batch.String())); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
				var resp fasthttp.Response
				if err := resp.Read(br); err != nil {
					t.Fatalf("pipelined answer %d: %v", i, err)
				}
			}

			// Five requests in five TLS records, all in one TCP write: the
			// server's TLS layer reads them together and hands out one
			// record at a time.
			raw := gatewaytest.Dial(t, e.Addr)
			held := &heldWrites{Conn: raw}
			rc := tls.Client(held, &tls.Config{ServerName: "a.test", RootCAs: e.CA.Pool()})
			if err := rc.Handshake(); err != nil {
				t.Fatal(err)
			}
			held.hold = true
			for i := range 5 {
				fmt.Fprintf(rc, "GET /r/%d HTTP/1.1\r\nHost: a.test\r\n\r\n", i)
			}
			held.flush(t)
			rbr := bufio.NewReader(rc)
			for i := range 5 {
				_ = raw.SetReadDeadline(time.Now().Add(3 * time.Second))
				var resp fasthttp.Response
				if err := resp.Read(rbr); err != nil {
					t.Fatalf("answer %d to requests sent in separate records: %v", i, err)
				}
			}
			if got := e.Up.Count(); got != 13 {
				t.Fatalf("upstream saw %d requests, want 13", got)
			}
		})
	}
}

// TestTLSCertificateReload: a certificate replaced on disk is served to new
// connections after a reload, while a connection made before keeps working.
func TestTLSCertificateReload(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := gatewaytest.StartTLS(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind})
			old, err := e.Dial(t, "a.test", 0)
			if err != nil {
				t.Fatal(err)
			}
			oldBR := bufio.NewReader(old)
			tlsGet(t, old, oldBR, "/before")

			e.CA.Issue(t, e.Dir, "a", "A2", "a.test")
			if changed, err := e.Store.Reload(); err != nil || !changed {
				t.Fatalf("reload: changed %v, %v", changed, err)
			}
			fresh, err := e.Dial(t, "a.test", 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := servedOrg(fresh); got != "A2" {
				t.Fatalf("a new connection got certificate %s, want the new A2", got)
			}
			if resp := tlsGet(t, old, oldBR, "/after"); resp.StatusCode() != 200 {
				t.Fatalf("the old connection after the reload: %d", resp.StatusCode())
			}
			if servedOrg(old) != "A" {
				t.Fatal("the old connection's certificate changed")
			}
		})
	}
}

// TestTLSWatchPicksUpNewFiles: the store's watcher reloads on its own.
func TestTLSWatchPicksUpNewFiles(t *testing.T) {
	e := gatewaytest.StartTLS(t, gatewaytest.OneService, gatewaytest.Options{})
	reloaded := make(chan error, 4)
	e.Store.Watch(50*time.Millisecond, func(err error) { reloaded <- err })
	defer e.Store.Close()
	time.Sleep(20 * time.Millisecond) // a different modification time
	e.CA.Issue(t, e.Dir, "a", "A3", "a.test")
	deadline := time.After(5 * time.Second)
	for {
		c, err := e.Dial(t, "a.test", 0)
		if err == nil && servedOrg(c) == "A3" {
			return
		}
		select {
		case <-deadline:
			t.Fatal("the new certificate was not served within 5s")
		case <-reloaded:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestTLSPlaintextOnTLSPortDropped: a client speaking cleartext HTTP to the
// TLS listener gets no HTTP answer and the connection closes.
func TestTLSPlaintextOnTLSPortDropped(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := gatewaytest.StartTLS(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind})
			conn := gatewaytest.Dial(t, e.Addr)
			gatewaytest.Write(t, conn, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
			// Closed (after at most a TLS alert), never answered in HTTP.
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(conn)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("a cleartext request left the TLS connection open")
			}
			if strings.Contains(string(got), "HTTP/") {
				t.Fatalf("cleartext answered on the TLS port: %q", got)
			}
			if e.Up.Count() != 0 {
				t.Fatal("a cleartext request reached the upstream through the TLS port")
			}
		})
	}
}

// heldWrites holds what is written while hold is set, for flush to send
// in one write.
type heldWrites struct {
	net.Conn
	hold bool
	buf  []byte
}

func (h *heldWrites) Write(p []byte) (int, error) {
	if h.hold {
		h.buf = append(h.buf, p...)
		return len(p), nil
	}
	return h.Conn.Write(p)
}

func (h *heldWrites) flush(t *testing.T) {
	t.Helper()
	h.hold = false
	if _, err := h.Conn.Write(h.buf); err != nil {
		t.Fatal(err)
	}
}

// TestTLSSessionResumption: a client that kept its session ticket resumes
// without a full handshake.
func TestTLSSessionResumption(t *testing.T) {
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		e := gatewaytest.StartTLS(t, gatewaytest.OneService, gatewaytest.Options{})
		cfg := &tls.Config{ServerName: "a.test", RootCAs: e.CA.Pool(), MaxVersion: version,
			ClientSessionCache: tls.NewLRUClientSessionCache(4)}
		for i, want := range []bool{false, true} {
			c, err := tls.Dial("tcp", e.Addr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			// TLS 1.3 tickets arrive after the handshake: read an answer.
			br := bufio.NewReader(c)
			tlsGet(t, c, br, "/r")
			if got := c.ConnectionState().DidResume; got != want {
				t.Fatalf("version %x, connection %d: resumed %v, want %v", version, i, got, want)
			}
			c.Close()
		}
	}
}

// TestRedirectHTTPS: a route with redirect_https answers a cleartext
// request 308 to the same URL on the TLS listener's port, without running
// the rest of its chain or reaching the backend; over TLS it is served.
func TestRedirectHTTPS(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewTestCA(t)
	cert, key := ca.Issue(t, dir, "api", "A", "api.test")
	up := testutil.StartRecordingUpstream(t)
	cfg := `
tls:
  listen: "127.0.0.1:8443"
  certs: [{cert: "` + cert + `", key: "` + key + `"}]
consumers:
  - {app_key: app, secret: a-secret-of-some-length}
services:
  up:
    instances: [{addr: "${UP}"}]
routes:
  - name: secure
    match: {prefix: /secure}
    redirect_https: true
    auth: signature
    service: up
  - name: open
    match: {prefix: /}
    service: up
`
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			g := gatewaytest.Start(t, cfg, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			before := up.Count()
			conn := gatewaytest.Dial(t, g.Addr)
			br := bufio.NewReader(conn)
			gatewaytest.Write(t, conn, "GET /secure/a%2Fb?x=1&y=%20 HTTP/1.1\r\nHost: api.test:8080\r\n\r\n")
			resp := gatewaytest.ReadAnswer(t, conn, br, false)
			if resp.StatusCode() != 308 || string(resp.Header.Peek("Location")) != "https://api.test:8443/secure/a%2Fb?x=1&y=%20" {
				t.Fatalf("cleartext: %d Location %q", resp.StatusCode(), resp.Header.Peek("Location"))
			}
			gatewaytest.Write(t, conn, "GET /open HTTP/1.1\r\nHost: api.test\r\n\r\n")
			if resp := gatewaytest.ReadAnswer(t, conn, br, false); resp.StatusCode() != 200 {
				t.Fatalf("a route without redirect_https: %d", resp.StatusCode())
			}
			if up.Count() != before+1 {
				t.Fatal("the redirected request reached the backend")
			}

			store, err := edgetls.NewStore([]edgetls.Pair{{Cert: cert, Key: key}})
			if err != nil {
				t.Fatal(err)
			}
			o := server.OptionsFor(g.File)
			o.TLS = store.Config(tls.VersionTLS12, nil)
			tr, err := server.NewTransport(kind, g.GW.Secure(), o)
			if err != nil {
				t.Fatal(err)
			}
			addr := gatewaytest.Serve(t, tr)
			tc, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "api.test", RootCAs: ca.Pool()})
			if err != nil {
				t.Fatal(err)
			}
			defer tc.Close()
			// Over TLS the route runs: its signature check refuses an
			// unsigned request (401), where cleartext never got that far.
			if resp := tlsGet(t, tc, bufio.NewReader(tc), "/secure/a"); resp.StatusCode() != 401 {
				t.Fatalf("over TLS: %d %s", resp.StatusCode(), resp.Body())
			}
		})
	}
}

// TestTLSSlowHandshakeCut: a client that starts a handshake and stalls
// (slowloris on the TLS port) is cut at the header timeout, like one that
// TestTLSHandshakeWritesTimeOut: a client that sends its hello and then
// never reads cannot hold a connection past the header timeout, even when
// the server's flight (here an 8 MiB certificate) outgrows the socket
// buffers and crypto/tls's write blocks inside the first read.
func TestTLSHandshakeWritesTimeOut(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewTestCA(t)
	cert, key := ca.IssuePadded(t, dir, "big", "Big", 8<<20, "big.test")
	store, err := edgetls.NewStore([]edgetls.Pair{{Cert: cert, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}, Tweak: func(o *server.Options) {
				o.TLS = store.Config(tls.VersionTLS12, []string{"http/1.1"})
				o.HeaderTimeout = 300 * time.Millisecond
			}})
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) {
					_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
				})
			}}
			raw, err := d.Dial("tcp", g.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			stall := make(chan struct{})
			defer close(stall)
			client := tls.Client(stalledReads{raw, stall}, &tls.Config{ServerName: "big.test", InsecureSkipVerify: true})
			go func() { _ = client.Handshake() }() // sends its hello, then waits to read
			// The client does not read for a second: the server's flight
			// stays stuck in its write meanwhile, until the header timeout
			// ends the connection. Then what the kernel still held of it
			// arrives, and the close: not the whole certificate, which
			// is larger than any socket buffer here.
			time.Sleep(time.Second)
			_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := io.Copy(io.Discard, raw)
			if err != nil || n >= 8<<20 {
				t.Fatalf("the client got %d bytes, then %v; want less than the 8 MiB certificate, then the close the header timeout made", n, err)
			}
		})
	}
}

// stalledReads is a connection whose reads wait until stall closes.
type stalledReads struct {
	net.Conn
	stall chan struct{}
}

func (s stalledReads) Read([]byte) (int, error) {
	<-s.stall
	return 0, io.EOF
}

// stalls in its headers.
func TestTLSSlowHandshakeCut(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := gatewaytest.StartTLS(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Tweak: func(o *server.Options) { o.HeaderTimeout = 300 * time.Millisecond }})
			conn := gatewaytest.Dial(t, e.Addr)
			gatewaytest.Write(t, conn, "\x16\x03\x01\x02\x00\x01") // a ClientHello's first bytes, then nothing
			start := time.Now()
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := io.Copy(io.Discard, conn)
			// Not refused at once (the bytes so far are a valid start):
			// cut by the timeout, and not much later.
			if took := time.Since(start); err != nil || took < 250*time.Millisecond || took > 3*time.Second {
				t.Fatalf("a stalled handshake ended after %v (%v), want the 300ms header timeout", took, err)
			}
		})
	}
}
