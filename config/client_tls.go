package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// ClientTLS is how the gateway reaches a server over TLS as its client:
// cluster.tls (Redis: one that holds the cluster's configuration, or that
// is reached beyond the host, should be) and a gRPC service's tls. Setting
// any field turns TLS on.
type ClientTLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile holds the PEM certificates that sign the server's
	// certificate; default the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the node's own certificate, for a server
	// that asks clients for one (Redis's tls-auth-clients, mTLS).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the server's certificate must carry;
	// default the host of the address.
	ServerName string `yaml:"server_name"`

	line int // where the block was written, for errors
}

// UnmarshalYAML records where the block was written.
func (t *ClientTLS) UnmarshalYAML(n *yaml.Node) error {
	type plain ClientTLS
	if err := n.Decode((*plain)(t)); err != nil {
		return err
	}
	t.line = n.Line
	return nil
}

// On reports whether TLS is asked for.
func (t ClientTLS) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// settings is t without where it was written: what a reload compares.
func (t ClientTLS) settings() ClientTLS {
	t.line = 0
	return t
}

// Config reads the files and returns the client's TLS settings; nil when
// TLS is off.
func (t ClientTLS) Config() (*tls.Config, error) {
	if !t.On() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificate in it", t.CAFile)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("cert_file and key_file go together")
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file/key_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
