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
	// ALPN lists the protocols offered, in the server's order of
	// preference; default [h2, http/1.1].
	ALPN []string `yaml:"alpn"`
	// HTTP2 holds the limits of h2 connections.
	HTTP2 ServerHTTP2 `yaml:"http2"`

	line int // where the block was written, for errors
}

// ServerHTTP2 are the limits an HTTP/2 client meets (zero: the default).
type ServerHTTP2 struct {
	// MaxConcurrentStreams a client may have open on one connection
	// (default 100).
	MaxConcurrentStreams uint32 `yaml:"max_concurrent_streams"`
	// MaxHeaderListBytes bounds a request's decoded header block
	// (default: client.max_header_bytes).
	MaxHeaderListBytes int `yaml:"max_header_list_bytes"`
	// StreamWindowBytes and ConnWindowBytes are the flow-control windows
	// for request bodies, per stream and per connection (defaults 256 KiB
	// and 1 MiB).
	StreamWindowBytes int32 `yaml:"stream_window_bytes"`
	ConnWindowBytes   int32 `yaml:"conn_window_bytes"`
	// MaxEarlyResets is how many streams a client may reset before they
	// are answered; past it (and half its streams) the connection is
	// closed (default 100).
	MaxEarlyResets int `yaml:"max_early_resets"`
}

// OffersH2 reports whether h2 is among the protocols offered.
func (t *ServerTLS) OffersH2() bool { return t != nil && slices.Contains(t.ALPN, "h2") }

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
		t.ALPN = []string{"h2", "http/1.1"}
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
	for i, p := range t.ALPN {
		switch p {
		case "http/1.1", "h2":
		default:
			return fmt.Errorf("alpn: unknown protocol %q (want h2 or http/1.1)", p)
		}
		if slices.Contains(t.ALPN[:i], p) {
			return fmt.Errorf("alpn: %s is listed twice", p)
		}
	}
	h := t.HTTP2
	switch {
	case h.MaxConcurrentStreams > 10000:
		return fmt.Errorf("http2.max_concurrent_streams %d: at most 10000", h.MaxConcurrentStreams)
	case h.MaxHeaderListBytes < 0:
		return fmt.Errorf("http2.max_header_list_bytes must not be negative")
	case h.StreamWindowBytes < 0 || h.ConnWindowBytes < 0:
		return fmt.Errorf("http2 windows must not be negative")
	case h.StreamWindowBytes > 0 && h.StreamWindowBytes < 16384 || h.ConnWindowBytes > 0 && h.ConnWindowBytes < 65535:
		return fmt.Errorf("http2: stream_window_bytes is at least 16384 and conn_window_bytes at least 65535")
	case h.MaxEarlyResets < 0:
		return fmt.Errorf("http2.max_early_resets must not be negative")
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
		slices.Equal(t.Certs, o.Certs) && slices.Equal(t.ALPN, o.ALPN) && t.HTTP2 == o.HTTP2
}
