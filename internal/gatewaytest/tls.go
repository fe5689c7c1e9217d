package gatewaytest

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/edgetls"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/server/h2"
	"golang.org/x/net/http2"
)

// TLSEdge is a gateway serving TLS with a test CA's certificates: b.test
// (the default, listed first), a.test and *.wild.test.
type TLSEdge struct {
	*Gateway
	CA    *testutil.TestCA
	Store *edgetls.Store
	// Dir holds the certificate and key files.
	Dir string
	// Up is the recording upstream ${UP} names unless Options.Vars did.
	Up *testutil.RecordingUpstream
	// H2 is the HTTP/2 server h2 connections go to; nil when the edge
	// offers HTTP/1.1 only.
	H2 *h2.Server
}

// StartTLS serves yaml over TLS, offering HTTP/1.1 only.
func StartTLS(tb testing.TB, yaml string, o Options) *TLSEdge {
	tb.Helper()
	return startTLS(tb, yaml, o, nil)
}

// StartH2 serves yaml over TLS, offering h2 (served by an HTTP/2 server
// with h2o) and HTTP/1.1.
func StartH2(tb testing.TB, yaml string, h2o h2.Options, o Options) *TLSEdge {
	tb.Helper()
	return startTLS(tb, yaml, o, h2.New(h2o))
}

func startTLS(tb testing.TB, yaml string, o Options, srv *h2.Server) *TLSEdge {
	tb.Helper()
	dir := tb.TempDir()
	ca := testutil.NewTestCA(tb)
	bc, bk := ca.Issue(tb, dir, "b", "B", "b.test")
	ac, ak := ca.Issue(tb, dir, "a", "A", "a.test")
	wc, wk := ca.Issue(tb, dir, "wild", "W", "*.wild.test")
	store, err := edgetls.NewStore([]edgetls.Pair{{Cert: bc, Key: bk}, {Cert: ac, Key: ak}, {Cert: wc, Key: wk}})
	if err != nil {
		tb.Fatal(err)
	}
	up := testutil.StartRecordingUpstream(tb)
	vars := map[string]string{"UP": up.Addr}
	for k, v := range o.Vars {
		vars[k] = v
	}
	tweak := o.Tweak
	o.Vars, o.Tweak = vars, func(opt *server.Options) {
		protos := []string{"http/1.1"}
		if srv != nil {
			protos = []string{"h2", "http/1.1"}
			opt.HTTP2 = srv
		}
		opt.TLS = store.Config(tls.VersionTLS12, protos)
		if tweak != nil {
			tweak(opt)
		}
	}
	g := Start(tb, yaml, o)
	return &TLSEdge{Gateway: g, CA: ca, Store: store, Dir: dir, Up: up, H2: srv}
}

// Dial opens a TLS connection naming sni, offering TLS up to maxVersion
// and from 1.0 on, so that a test capping maxVersion below 1.2 really
// offers the old version (Go's client floor would refuse it by itself).
// The connection is closed when the test ends.
func (e *TLSEdge) Dial(tb testing.TB, sni string, maxVersion uint16) (*tls.Conn, error) {
	tb.Helper()
	conn, err := tls.Dial("tcp", e.Addr, &tls.Config{ServerName: sni, RootCAs: e.CA.Pool(),
		MinVersion: tls.VersionTLS10, MaxVersion: maxVersion})
	if err == nil {
		tb.Cleanup(func() { conn.Close() })
	}
	return conn, err
}

// Client is a Go client of the edge for a.test: HTTP/2 only, or HTTP/1.1.
func (e *TLSEdge) Client(h2only bool) *http.Client {
	conf := &tls.Config{ServerName: "a.test", RootCAs: e.CA.Pool()}
	if h2only {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http2.Transport{TLSClientConfig: conf, DisableCompression: true}}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: conf, DisableCompression: true}}
}

// Do sends one request for a.test to the edge with c and returns the
// answer with its body read.
func (e *TLSEdge) Do(tb testing.TB, c *http.Client, method, path string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, "https://"+e.Addr+path, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if body == nil {
		req.Body = nil
	}
	req.Host = "a.test"
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, b
}
