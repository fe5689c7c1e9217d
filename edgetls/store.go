// Package edgetls is TLS termination's configuration for the client
// listeners: the certificates, chosen by SNI (exact names, then wildcards,
// then the first certificate), reloaded when their files change or on
// demand (SIGHUP) without touching connections already open, and the
// tls.Config the transports serve with.
package edgetls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Pair names a certificate chain and its key, PEM files; one entry of the
// tls section's certs. The certificate is served to the names it carries
// (SNI), the first one to any other.
type Pair struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Store holds the certificates the edge serves. It is safe for concurrent
// use: handshakes read the current set while a reload replaces it.
type Store struct {
	pairs []Pair
	set   atomic.Pointer[certSet]

	mu    sync.Mutex // serializes reloads
	stamp []fileStamp
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// certSet is one loaded generation of the certificates.
type certSet struct {
	exact    map[string]*tls.Certificate // lower-case DNS name
	wildcard map[string]*tls.Certificate // "example.com" for *.example.com
	first    *tls.Certificate
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewStore loads pairs; it fails when one cannot be read or does not
// parse, or when a key does not match its certificate.
func NewStore(pairs []Pair) (*Store, error) {
	if len(pairs) == 0 {
		return nil, errors.New("no certificate")
	}
	s := &Store{pairs: pairs}
	set, stamp, err := load(pairs)
	if err != nil {
		return nil, err
	}
	s.set.Store(set)
	s.stamp = stamp
	return s, nil
}

// stampsOf stats every file of pairs, certificate then key.
func stampsOf(pairs []Pair) ([]fileStamp, error) {
	stamp := make([]fileStamp, 0, 2*len(pairs))
	for _, p := range pairs {
		for _, name := range []string{p.Cert, p.Key} {
			st, err := os.Stat(name)
			if err != nil {
				return nil, fmt.Errorf("certificate files: %w", err)
			}
			stamp = append(stamp, fileStamp{st.ModTime(), st.Size()})
		}
	}
	return stamp, nil
}

func load(pairs []Pair) (*certSet, []fileStamp, error) {
	set := &certSet{exact: map[string]*tls.Certificate{}, wildcard: map[string]*tls.Certificate{}}
	stamp, err := stampsOf(pairs)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pairs {
		cert, err := tls.LoadX509KeyPair(p.Cert, p.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("%s with %s: %w", p.Cert, p.Key, err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p.Cert, err)
		}
		cert.Leaf = leaf
		names := leaf.DNSNames
		if len(names) == 0 && leaf.Subject.CommonName != "" {
			names = []string{leaf.Subject.CommonName}
		}
		c := &cert
		for _, n := range names {
			n = strings.ToLower(n)
			if rest, ok := strings.CutPrefix(n, "*."); ok {
				if _, dup := set.wildcard[rest]; !dup {
					set.wildcard[rest] = c
				}
				continue
			}
			if _, dup := set.exact[n]; !dup {
				set.exact[n] = c
			}
		}
		if set.first == nil {
			set.first = c
		}
	}
	return set, stamp, nil
}

// Certificate picks the certificate for a handshake: the one naming the
// server name exactly, else a wildcard covering it (one label deep), else
// the first configured.
func (s *Store) Certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	set := s.set.Load()
	name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	if c := set.exact[name]; c != nil {
		return c, nil
	}
	if _, rest, ok := strings.Cut(name, "."); ok {
		if c := set.wildcard[rest]; c != nil {
			return c, nil
		}
	}
	return set.first, nil
}

// Reload reads the files again; on an error the certificates in use stay.
// It reports whether anything changed.
func (s *Store) Reload() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, stamp, err := load(s.pairs)
	if err != nil {
		return false, err
	}
	changed := !equalStamps(stamp, s.stamp)
	s.set.Store(set)
	s.stamp = stamp
	return changed, nil
}

// changed reports whether a file's size or modification time differs from
// the loaded generation's (a file that cannot be read is left to the next
// check).
func (s *Store) changed() bool {
	stamp, err := stampsOf(s.pairs)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !equalStamps(stamp, s.stamp)
}

func equalStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// Watch reloads the certificates every interval in which a file changed,
// until Close; report sees each reload's outcome.
func (s *Store) Watch(interval time.Duration, report func(error)) {
	s.once.Do(func() {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(s.done)
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-s.stop:
					return
				case <-tick.C:
				}
				if !s.changed() {
					continue
				}
				// A file being rewritten may be caught half-written:
				// the load then fails, and the next tick tries again.
				if _, err := s.Reload(); report != nil {
					report(err)
				}
			}
		}()
	})
}

// Close stops Watch.
func (s *Store) Close() {
	if s.stop != nil {
		select {
		case <-s.stop:
		default:
			close(s.stop)
		}
		<-s.done
	}
}

// Versions maps the configuration's min_version to crypto/tls's.
var Versions = map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}

// cipherSuites are TLS 1.2's suites the edge accepts: forward-secret
// AEAD only (TLS 1.3's are fixed by crypto/tls and all modern).
var cipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Config is the tls.Config a client listener serves with. Session tickets
// are on, with keys crypto/tls generates and rotates itself.
func (s *Store) Config(minVersion uint16, alpn []string) *tls.Config {
	return &tls.Config{
		MinVersion:     minVersion,
		CipherSuites:   cipherSuites,
		NextProtos:     alpn,
		GetCertificate: s.Certificate,
	}
}
