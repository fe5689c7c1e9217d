package admin

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/observe"
)

// rawGet sends one GET for path with the given Host line (none when host
// is empty, as HTTP/1.0) over a fresh socket and returns the answer.
func rawGet(t *testing.T, addr, path, host string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	raw := "GET " + path + " HTTP/1.0\r\n\r\n"
	if host != "" {
		raw = "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n"
	}
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s with Host %q: %v", path, host, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}

// TestAdminAnswersOnlyItsOwnNames: a request whose Host is a name rebound
// to the listener's address (DNS rebinding) is refused with 421 and the
// JSON error on every endpoint, the token's or not; loopback names, the
// address dialed, the listen address's name and admin.hosts are served.
func TestAdminAnswersOnlyItsOwnNames(t *testing.T) {
	d := opsDeps("", observe.NewMetrics(), nil)
	d.Listen = "gw-admin.example:9901"
	d.Hosts = []string{"Ops.Example.COM", "[2001:db8::9]"}
	s := New(d)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	addr := ln.Addr().String()
	port := addr[strings.LastIndexByte(addr, ':'):]

	paths := []string{"/admin/config", "/dashboard", "/debug/pprof/", "/metrics", "/admin/stats", "/healthz"}
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example" + port, "localhost.attacker.example",
		"127.0.0.1.nip.io" + port, "gw-admin.example.attacker", "10.1.2.3" + port, "[2001:db8::1]" + port} {
		for _, p := range paths {
			status, body := rawGet(t, addr, p, host)
			if status != http.StatusMisdirectedRequest || !strings.HasPrefix(body, `{"code":421,"message":`) {
				t.Errorf("%s with Host %s: %d %.80q, want 421 and the JSON error", p, host, status, body)
			}
		}
	}
	for _, host := range []string{addr, "127.0.0.1", "localhost" + port, "LOCALHOST", "localhost.", "127.0.0.2" + port,
		"[::1]" + port, "[::ffff:127.0.0.1]", "gw-admin.example" + port, "ops.example.com", "OPS.example.com.:443",
		"[2001:db8::9]" + port, ""} {
		for _, p := range paths {
			if status, body := rawGet(t, addr, p, host); status != http.StatusOK {
				t.Errorf("%s with Host %q: %d %.80q, want 200", p, host, status, body)
			}
		}
	}
}
