package main

import (
	"fmt"
	"net"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/edgetls"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/server/h2"
	"go.uber.org/zap"
)

// certWatch is how often the certificate files are checked for a change.
const certWatch = 2 * time.Second

// tlsListener is the client TLS listener (tls block): its own transport,
// of the configured kind, on the same gateway.
type tlsListener struct {
	ln        net.Listener
	transport server.Transport
	certs     *edgetls.Store
	h2        *h2.Server // nil when h2 is not offered
	log       *zap.Logger
}

// startTLS sets the TLS listener up; nil when the config has none.
func startTLS(f *config.File, gw *server.Gateway, log *zap.Logger) (*tlsListener, error) {
	if f.TLS == nil {
		return nil, nil
	}
	certs, err := edgetls.NewStore(f.TLS.Pairs())
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	o := server.OptionsFor(f)
	o.TLS = certs.Config(f.TLS.MinTLSVersion(), f.TLS.ALPN)
	h2srv := server.HTTP2For(f)
	if h2srv != nil {
		o.HTTP2 = h2srv
	}
	tr, err := server.NewTransport(f.Transport, gw.Secure(), o)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", f.TLS.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (tls): %w", f.TLS.Listen, err)
	}
	s := &tlsListener{ln: ln, transport: tr, certs: certs, h2: h2srv, log: log}
	certs.Watch(certWatch, func(err error) { s.reported("file changed", true, err) })
	log.Info("tollgate listening (tls)", zap.String("addr", ln.Addr().String()), zap.String("min_version", f.TLS.MinVersion),
		zap.Strings("alpn", f.TLS.ALPN))
	return s, nil
}

// reloadCerts reads the certificate files again (SIGHUP).
func (s *tlsListener) reloadCerts(reason string) {
	changed, err := s.certs.Reload()
	s.reported(reason, changed, err)
}

func (s *tlsListener) reported(reason string, changed bool, err error) {
	switch {
	case err != nil:
		s.log.Error("certificates not reloaded; the ones in use stay", zap.String("reason", reason), zap.Error(err))
	case changed:
		s.log.Info("certificates reloaded: new connections get them", zap.String("reason", reason))
	}
}
