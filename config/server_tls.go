package config

import (
	"fmt"
	"net"
	"slices"

	"github.com/tollgate/tollgate/edgetls"
	"gopkg.in/yaml.v3"
)

// ServerTLS is the top-level tls block: a TLS listener for clients, on the
// same routes as the cleartext one.
type ServerTLS struct {
	Listen string     `yaml:"listen"`
	Certs  []CertPair `yaml:"certs"`
	// MinVersion is the oldest TLS version accepted: "1.2" (default) or
	// "1.3".
	MinVersion string `yaml:"min_version"`
	// ALPN lists the protocols offered; default [http/1.1].
	ALPN []string `yaml:"alpn"`

	line int // where the block was written, for errors
}

// CertPair is a certificate chain and its key, PEM files; the certificate
// is served to the names it carries (SNI), the first one to any other.
type CertPair struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// UnmarshalYAML records where the block was written.
func (t *ServerTLS) UnmarshalYAML(n *yaml.Node) error {
	type plain ServerTLS
	if err := n.Decode((*plain)(t)); err != nil {
		return err
	}
	t.line = n.Line
	return nil
}

// Pairs lists the certificate files for edgetls.
func (t *ServerTLS) Pairs() []edgetls.Pair {
	out := make([]edgetls.Pair, len(t.Certs))
	for i, c := range t.Certs {
		out[i] = edgetls.Pair{Cert: c.Cert, Key: c.Key}
	}
	return out
}

// MinTLSVersion is min_version as crypto/tls names it.
func (t *ServerTLS) MinTLSVersion() uint16 { return edgetls.Versions[t.MinVersion] }

func (t *ServerTLS) defaults() {
	if t.MinVersion == "" {
		t.MinVersion = "1.2"
	}
	if len(t.ALPN) == 0 {
		t.ALPN = []string{"http/1.1"}
	}
}

// validate checks the block and loads the certificates once, so a bad
// file is refused with the block's line rather than at the first
// handshake.
func (t *ServerTLS) validate() error {
	if _, _, err := net.SplitHostPort(t.Listen); err != nil {
		return fmt.Errorf("listen %q: %v", t.Listen, err)
	}
	if _, ok := edgetls.Versions[t.MinVersion]; !ok {
		return fmt.Errorf("min_version %q: want 1.2 or 1.3 (TLS 1.0 and 1.1 are refused)", t.MinVersion)
	}
	for _, p := range t.ALPN {
		switch p {
		case "http/1.1":
		case "h2":
			return fmt.Errorf("alpn: h2 is not supported by this version of tollgate yet; offer [http/1.1]")
		default:
			return fmt.Errorf("alpn: unknown protocol %q (want http/1.1)", p)
		}
	}
	if len(t.Certs) == 0 {
		return fmt.Errorf("certs: at least one {cert, key} is needed")
	}
	for i, c := range t.Certs {
		if c.Cert == "" || c.Key == "" {
			return fmt.Errorf("certs[%d]: both cert and key are needed", i)
		}
	}
	if _, err := edgetls.NewStore(t.Pairs()); err != nil {
		return err
	}
	return nil
}

// settings is t without where it was written: what a reload compares.
func (t *ServerTLS) settings() ServerTLS {
	if t == nil {
		return ServerTLS{}
	}
	s := *t
	s.line = 0
	return s
}

func (t ServerTLS) equal(o ServerTLS) bool {
	return t.Listen == o.Listen && t.MinVersion == o.MinVersion &&
		slices.Equal(t.Certs, o.Certs) && slices.Equal(t.ALPN, o.ALPN)
}
