package edgetls

import (
	"fmt"
	"net"
	"slices"

	"github.com/tollgate/tollgate/pipeline"
)

// Settings is the top-level `tls` section: a TLS listener for clients, on
// the same routes as the cleartext one.
//
//	tls:
//	  listen: ":8443"
//	  certs: [{cert: api.pem, key: api.key}]
type Settings struct {
	Listen string `yaml:"listen"`
	Certs  []Pair `yaml:"certs"`
	// MinVersion is the oldest TLS version accepted: "1.2" (default) or
	// "1.3".
	MinVersion string `yaml:"min_version"`
	// ALPN lists the protocols offered, in the server's order of
	// preference; default [h2, http/1.1].
	ALPN []string `yaml:"alpn"`
	// HTTP2 holds the limits of h2 connections.
	HTTP2 HTTP2Limits `yaml:"http2"`
}

// HTTP2Limits are the limits an HTTP/2 client meets (zero: the default).
type HTTP2Limits struct {
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

// SettingsKey holds the snapshot's tls section as provisioned (defaults
// written in); it is unset without one. The process reads it at start to
// open the listener.
var SettingsKey = pipeline.NewKey[*Settings]("edgetls.settings")

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key: "tls",
		// The listener, its certificates' files and its limits are set up
		// once, at start; the files' contents reload by themselves.
		RestartOnly: true,
		// A file without the section leaves the pointer nil: no listener.
		Config:    func() any { return new(*Settings) },
		Provision: provision,
	})
}

func provision(env *pipeline.Env, cfg any) error {
	s := *cfg.(**Settings)
	if s == nil {
		return nil
	}
	s.defaults()
	if err := s.validate(); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	ls, _ := pipeline.ListenersKey.Get(env)
	ls.TLS = s.Listen
	pipeline.ListenersKey.Set(env, ls)
	SettingsKey.Set(env, s)
	return nil
}

// OffersH2 reports whether h2 is among the protocols offered.
func (s *Settings) OffersH2() bool { return s != nil && slices.Contains(s.ALPN, "h2") }

// MinTLSVersion is min_version as crypto/tls names it.
func (s *Settings) MinTLSVersion() uint16 { return Versions[s.MinVersion] }

func (s *Settings) defaults() {
	if s.MinVersion == "" {
		s.MinVersion = "1.2"
	}
	if len(s.ALPN) == 0 {
		s.ALPN = []string{"h2", "http/1.1"}
	}
}

// validate checks the section and loads the certificates once, so a bad
// file is refused with the section's line rather than at the first
// handshake. A file checked for other hosts (pipeline.Env.ForOtherHosts)
// is no exception: a document naming certificates this host cannot read
// is refused here too.
func (s *Settings) validate() error {
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		return fmt.Errorf("listen %q: %v", s.Listen, err)
	}
	if _, ok := Versions[s.MinVersion]; !ok {
		return fmt.Errorf("min_version %q: want 1.2 or 1.3 (TLS 1.0 and 1.1 are refused)", s.MinVersion)
	}
	for i, p := range s.ALPN {
		switch p {
		case "http/1.1", "h2":
		default:
			return fmt.Errorf("alpn: unknown protocol %q (want h2 or http/1.1)", p)
		}
		if slices.Contains(s.ALPN[:i], p) {
			return fmt.Errorf("alpn: %s is listed twice", p)
		}
	}
	if err := s.HTTP2.validate(); err != nil {
		return err
	}
	if len(s.Certs) == 0 {
		return fmt.Errorf("certs: at least one {cert, key} is needed")
	}
	for i, c := range s.Certs {
		if c.Cert == "" || c.Key == "" {
			return fmt.Errorf("certs[%d]: both cert and key are needed", i)
		}
	}
	if _, err := NewStore(s.Certs); err != nil {
		return err
	}
	return nil
}

func (h HTTP2Limits) validate() error {
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
	return nil
}
