package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestCA is a certificate authority made at test time, for TLS tests.
type TestCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

var serial atomic.Int64

// NewTestCA makes a CA valid for an hour.
func NewTestCA(t testing.TB) *TestCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "tollgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &TestCA{cert: cert, key: key, pool: pool}
}

// Pool holds the CA, for clients.
func (ca *TestCA) Pool() *x509.CertPool { return ca.pool }

// PEM is the CA's certificate, PEM-encoded, for clients that read a file.
func (ca *TestCA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// Issue writes dir/name.pem and dir/name.key: a server certificate for
// names (DNS names; "*.x" wildcards allowed), with the
// organization org (to tell certificates apart). It returns both paths.
func (ca *TestCA) Issue(t testing.TB, dir, name, org string, names ...string) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, dir, name, org, 0, names)
}

// IssuePadded is Issue with a non-critical extension of pad bytes in the
// certificate: a handshake whose server flight is that large.
func (ca *TestCA) IssuePadded(t testing.TB, dir, name, org string, pad int, names ...string) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, dir, name, org, pad, names)
}

func (ca *TestCA) issue(t testing.TB, dir, name, org string, pad int, names []string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name, Organization: []string{org}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: names, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if pad > 0 {
		// A private-use OID; the value is an opaque OCTET STRING's content.
		tmpl.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 55555, 1}, Value: make([]byte, pad)}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	// Written beside and renamed, as a deploy would, so a watcher never
	// reads half a file.
	write := func(path string, block *pem.Block) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(keyFile, &pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	write(certFile, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	return certFile, keyFile
}
