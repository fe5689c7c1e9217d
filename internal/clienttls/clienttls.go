// Package clienttls is how the gateway reaches a server over TLS as its
// client, as operators write it: the cluster's Redis (cluster.tls) and a
// gRPC service's instances (services.NAME.tls) share the settings, their
// names and their messages.
package clienttls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// Settings are a TLS client's settings. Setting any field turns TLS on.
type Settings struct {
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

	// Line is where the block was written, for errors.
	Line int `yaml:"-" digest:"-"`
}

// UnmarshalYAML records where the block was written.
func (t *Settings) UnmarshalYAML(n *yaml.Node) error {
	type plain Settings
	if err := n.Decode((*plain)(t)); err != nil {
		return err
	}
	t.Line = n.Line
	return nil
}

// On reports whether TLS is asked for.
func (t Settings) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// WithoutPlace is t without where it was written: what a reload compares.
func (t Settings) WithoutPlace() Settings {
	t.Line = 0
	return t
}

// Config reads the files and returns the client's TLS settings; nil when
// TLS is off.
func (t Settings) Config() (*tls.Config, error) {
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
