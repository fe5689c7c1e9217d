package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const certUsageText = `Usage: tollgate cert [--host NAMES] [--out DIR] [--days N]

Writes a self-signed certificate and its key (ECDSA P-256) for trying TLS
and HTTP/2 on a development machine: DIR/cert.pem and DIR/key.pem, for
tls.certs in the configuration. Clients will not trust it (curl needs -k or
--cacert DIR/cert.pem). Never use it in production: take certificates from
your CA or ACME.

Flags (before or after the others):
  --host NAMES   comma-separated DNS names and IP addresses the certificate
                 is for (default localhost,127.0.0.1,::1)
  --out DIR      where to write the files (default .; created if missing;
                 existing files are not overwritten)
  --days N       how long it is valid (default 30)
`

// certCommand implements "tollgate cert": 0 when the files are written, 1
// when they cannot be, 2 on bad arguments.
func certCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cert", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	hosts := fs.String("host", "localhost,127.0.0.1,::1", "")
	out := fs.String("out", ".", "")
	days := fs.Int("days", 30, "")
	err := fs.Parse(args)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err == nil && (*days < 1 || *days > 3650) {
		err = fmt.Errorf("--days %d: give 1 to 3650", *days)
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, certUsageText)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate cert: %v\n\n%s", err, certUsageText)
		return 2
	}
	certPath, keyPath, err := writeSelfSigned(*out, strings.Split(*hosts, ","), time.Duration(*days)*24*time.Hour)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate cert: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s and %s (self-signed for %s, %d days; for development only)\n", certPath, keyPath, *hosts, *days)
	return 0
}

func writeSelfSigned(dir string, hosts []string, valid time.Duration) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "tollgate development certificate"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(valid),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // so that --cacert cert.pem verifies it
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if len(tmpl.IPAddresses)+len(tmpl.DNSNames) == 0 {
		return "", "", errors.New("--host names no host")
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	// The key first, readable by its owner only; neither file replaces one
	// that exists (a real certificate may live there).
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		_ = os.Remove(keyPath)
		return "", "", err
	}
	return certPath, keyPath, nil
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists and is not overwritten: remove it or give another --out", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
