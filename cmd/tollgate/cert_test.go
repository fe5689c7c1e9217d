package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCertCommand: tollgate cert writes a certificate and key that load as
// a TLS pair, name the hosts asked for, verify against the certificate
// itself (curl --cacert), and never replace files that exist.
func TestCertCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	var out, errOut bytes.Buffer
	if code := mainWithArgs([]string{"cert", "--out", dir, "--host", "api.local,127.0.0.2", "--days", "2"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	for _, host := range []string{"api.local", "127.0.0.2"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.local", Roots: pool}); err == nil {
		t.Error("verifies for a host it was not made for")
	}
	if st, _ := os.Stat(keyPath); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", st.Mode().Perm())
	}
	before, _ := os.ReadFile(certPath)
	errOut.Reset()
	if code := mainWithArgs([]string{"cert", "--out", dir}, io.Discard, &errOut); code != 1 || !strings.Contains(errOut.String(), "not overwritten") {
		t.Fatalf("second run: exit %d: %s", code, errOut.String())
	}
	if after, _ := os.ReadFile(certPath); !bytes.Equal(before, after) {
		t.Fatal("the certificate was replaced")
	}
	if block, _ := pem.Decode(before); block == nil || block.Type != "CERTIFICATE" {
		t.Fatal("cert.pem is not a PEM certificate")
	}
	for _, args := range [][]string{{"cert", "extra"}, {"cert", "--days", "0"}, {"cert", "--nope"}} {
		if code := mainWithArgs(args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestDemoUpstreamAlone: the demo backend started by itself answers with
// what it received and the name it was given.
func TestDemoUpstreamAlone(t *testing.T) {
	d, err := listenDemoUpstream("127.0.0.1:0", `b "2"`)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	resp, err := http.Get("http://" + d.Addr() + "/x?y=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.HasPrefix(body, []byte(`{"upstream":"b \"2\"","method":"GET","uri":"/x?y=1"`)) {
		t.Fatalf("answer %s", body)
	}
	var out bytes.Buffer
	if code := mainWithArgs([]string{"demo-upstream", "--help"}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "--listen ADDR") {
		t.Fatalf("--help: exit %d, %q", code, out.String())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var errOut bytes.Buffer
	if code := mainWithArgs([]string{"demo-upstream", "--listen", ln.Addr().String()}, io.Discard, &errOut); code != 1 || !strings.Contains(errOut.String(), "address already in use") {
		t.Fatalf("busy address: exit %d, %q", code, errOut.String())
	}
}
