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

// startTLS sets the TLS listener of snap's tls section up; nil when the
// configuration has none.
func startTLS(snap *config.Snapshot, gw *server.Gateway, log *zap.Logger) (*tlsListener, error) {
	t, _ := edgetls.SettingsKey.Get(snap.Env())
	if t == nil {
		return nil, nil
	}
	f := snap.File
	certs, err := edgetls.NewStore(t.Certs)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	o := server.OptionsFor(f)
	o.TLS = certs.Config(t.MinTLSVersion(), t.ALPN)
	h2srv := server.HTTP2For(f, t)
	if h2srv != nil {
		o.HTTP2 = h2srv
	}
	tr, err := server.NewTransport(f.Transport, gw.Secure(), o)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", t.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (tls): %w", t.Listen, err)
	}
	s := &tlsListener{ln: ln, transport: tr, certs: certs, h2: h2srv, log: log}
	certs.Watch(certWatch, func(err error) { s.reported("file changed", true, err) })
	log.Info("tollgate listening (tls)", zap.String("addr", ln.Addr().String()), zap.String("min_version", t.MinVersion),
		zap.Strings("alpn", t.ALPN))
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
