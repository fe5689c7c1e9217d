package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/internal/testutil"
)

// writeCert writes a PEM certificate and key for 127.0.0.1 signed by ca
// (self-signed, a CA, when ca is nil) and returns the cert and key.
func writeCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"redis.test"},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	parent, signer := tmpl, key
	if ca == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	} else {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(name+".pem", "CERTIFICATE", der)
	write(name+"-key.pem", "EC PRIVATE KEY", kb)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestClientTLSReachesRedis: a redis-server that speaks only TLS on its
// TLS port (and asks for client certificates) is reached with cluster.tls,
// and refused without it, with another CA, or without the client
// certificate.
func TestClientTLSReachesRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server with TLS")
	}
	dir := t.TempDir()
	ca, caKey := writeCert(t, dir, "ca", nil, nil)
	writeCert(t, dir, "server", ca, caKey)
	writeCert(t, dir, "client", ca, caKey)
	writeCert(t, dir, "other-ca", nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	testutil.StartRedis(t, "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server-key.pem"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "yes")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))

	client := ClientTLS{CAFile: filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client-key.pem")}
	cfg, err := client.Config()
	if err != nil {
		t.Fatal(err)
	}
	if !reaches(addr, cfg) {
		t.Fatal("cluster.tls with the CA and a client certificate did not reach Redis")
	}
	// Each refusal is known only once the wait for health runs out; the
	// three wait side by side (waiting, not working: -parallel, which is
	// the number of cores, would let only some wait at once).
	other := client
	other.CAFile = filepath.Join(dir, "other-ca.pem")
	refusals := map[string]ClientTLS{
		"a plain connection reached Redis's TLS port":                          {},
		"a Redis certificate from another CA was accepted":                     other,
		"Redis asks for a client certificate, yet a client without one got in": {CAFile: filepath.Join(dir, "ca.pem")},
	}
	got := make(map[string]bool, len(refusals))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for failure, tc := range refusals {
		cfg, err := tc.Config()
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			ok := reaches(addr, cfg)
			mu.Lock()
			got[failure] = ok
			mu.Unlock()
		})
	}
	wg.Wait()
	for failure, ok := range got {
		if ok {
			t.Error(failure)
		}
	}
}

// TestClientTLSErrorsNameTheLine: unreadable or mismatched files are a
// configuration error at the tls block's line.
func TestClientTLSErrorsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"missing ca": {"cluster:\n  redis: 127.0.0.1:6379\n  tls:\n    ca_file: " + filepath.Join(dir, "none.pem") + "\n", ":4:"},
		"cert alone": {"cluster:\n  redis: 127.0.0.1:6379\n  tls: {cert_file: a.pem}\n", "cert_file and key_file go together"},
		"not pem":    {"cluster:\n  tls:\n    ca_file: " + writeFile(t, dir, "junk.pem", "junk") + "\n", "no PEM certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := compile(t, tc.yaml, noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cluster.tls") {
				t.Fatalf("error %v, want %q naming cluster.tls", err, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// reaches reports whether a cluster client with the TLS settings cfg gets
// healthy at addr, and writes there, within 2s.
func reaches(addr string, cfg *tls.Config) bool {
	cl, err := cluster.New(cluster.Options{Addrs: []string{addr}, TLS: cfg, NodeID: "tls-test",
		DialTimeout: 300 * time.Millisecond, ProbeTimeout: 300 * time.Millisecond})
	if err != nil {
		return false
	}
	defer cl.Close()
	deadline := time.Now().Add(2 * time.Second)
	for !cl.Healthy() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return cl.Healthy() && cl.AddToSet("tls:probe", "x", time.Second) == nil
}
