package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Defaults of the `discovery.etcd` settings.
const (
	defaultPrefix      = "/services/"
	defaultDialTimeout = 5 * time.Second
	defaultTimeout     = 5 * time.Second
)

// Settings is the `discovery.etcd` section.
type Settings struct {
	// Endpoints are the etcd members, host:port or http(s)://host:port.
	Endpoints []string `yaml:"endpoints"`
	// Prefix is where services are registered: a service NAME's
	// instances are the keys under PREFIX + NAME + "/".
	Prefix   string    `yaml:"prefix"`
	TLS      ClientTLS `yaml:"tls"`
	Username string    `yaml:"username"`
	Password string    `yaml:"password" secret:"true"`
	// DialTimeout bounds connecting and authenticating.
	DialTimeout pipeline.Duration `yaml:"dial_timeout"`
	// Timeout bounds each request (the listing, the liveness probe), so
	// a member that hangs shows as a failure instead of a silent wait.
	Timeout pipeline.Duration `yaml:"timeout"`
}

// ClientTLS is how the gateway reaches etcd over TLS, with the names the
// gateway's other client TLS blocks use. Setting any field turns TLS on.
type ClientTLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile holds the PEM certificates that sign the members'
	// certificates; default the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the gateway's own certificate, for a
	// cluster that asks clients for one (etcd's --client-cert-auth).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the members' certificates must carry;
	// default the host of each endpoint.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any certificate: traffic is encrypted
	// but anyone on the path can pose as etcd. For tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// TargetSettings is a service's `discover` mapping for etcd.
type TargetSettings struct {
	From string `yaml:"from"`
	// Name is the service's name in etcd: its instances are under
	// PREFIX + Name + "/".
	Name string `yaml:"name"`
}

// on reports whether TLS is asked for.
func (t ClientTLS) on() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" ||
		t.ServerName != "" || t.InsecureSkipVerify
}

// config reads the files and returns the client's TLS settings; nil when
// TLS is off.
func (t ClientTLS) config() (*tls.Config, error) {
	if !t.on() {
		return nil, nil
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // the operator's explicit choice
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file %s: no PEM certificate in it", t.CAFile)
		}
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file/key_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if t.ServerName != "" && !t.InsecureSkipVerify {
		verifyAs(cfg, t.ServerName)
	}
	return cfg, nil
}

// verifyAs makes cfg check the server's certificate for name. gRPC, which
// etcd's client runs on, sets the handshake's server name from each
// endpoint's address, whatever the configuration says; so the chain is
// verified here instead, once the handshake has it, against the same
// roots (the system's when RootCAs is nil).
func verifyAs(cfg *tls.Config, name string) {
	roots := cfg.RootCAs
	cfg.InsecureSkipVerify = true //nolint:gosec // replaced by VerifyConnection below
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tls: the server sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			DNSName: name, Roots: roots, Intermediates: inter,
		})
		return err
	}
}

// validate checks s and fills in defaults. It reads no file; the TLS
// files are read by tlsConfig.
func (s *Settings) validate() error {
	if len(s.Endpoints) == 0 {
		return errors.New("discovery.etcd: endpoints is required (etcd members, host:port)")
	}
	for i, ep := range s.Endpoints {
		if err := checkEndpoint(ep, s.TLS.on()); err != nil {
			return fmt.Errorf("discovery.etcd: endpoints[%d] %q: %w", i, ep, err)
		}
	}
	if s.Prefix == "" {
		s.Prefix = defaultPrefix
	}
	if !strings.HasPrefix(s.Prefix, "/") {
		return fmt.Errorf("discovery.etcd: prefix %q must start with /", s.Prefix)
	}
	if !strings.HasSuffix(s.Prefix, "/") {
		s.Prefix += "/"
	}
	if (s.Username == "") != (s.Password == "") {
		return errors.New("discovery.etcd: username and password go together")
	}
	if (s.TLS.CertFile == "") != (s.TLS.KeyFile == "") {
		return errors.New("discovery.etcd: tls.cert_file and tls.key_file go together")
	}
	if s.DialTimeout == 0 {
		s.DialTimeout = pipeline.Duration(defaultDialTimeout)
	}
	if s.Timeout == 0 {
		s.Timeout = pipeline.Duration(defaultTimeout)
	}
	return nil
}

// checkEndpoint accepts host:port, http://host:port and https://host:port;
// an http:// endpoint with TLS settings is a contradiction.
func checkEndpoint(ep string, tlsOn bool) error {
	hostPort := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return err
		}
		switch {
		case u.Scheme != "http" && u.Scheme != "https":
			return errors.New("the scheme must be http or https")
		case u.Scheme == "http" && tlsOn:
			return errors.New("http:// while tls is set: write https:// or host:port")
		case u.Path != "" && u.Path != "/", u.RawQuery != "", u.User != nil:
			return errors.New("want scheme://host:port and nothing more")
		}
		hostPort = u.Host
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return errors.New("want host:port with a port 1..65535")
	}
	return nil
}

// validateName checks a service's etcd name: one path segment, so that
// PREFIX + name + "/" is exactly that service's folder.
func validateName(name string) error {
	switch {
	case name == "":
		return errors.New("discover.name is required (the service's name under the etcd prefix)")
	case strings.Contains(name, "/"):
		return fmt.Errorf("discover.name %q: no / in a name", name)
	case strings.TrimSpace(name) != name || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("discover.name %q: no spaces around and no control characters", name)
	}
	return nil
}
