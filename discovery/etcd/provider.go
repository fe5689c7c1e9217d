// Package etcd finds services' instances in etcd, in etcd's own naming
// layout (go.etcd.io/etcd/client/v3/naming/endpoints): a service NAME's
// instances are the keys PREFIX/NAME/…, each value
// {"Op":0,"Addr":"host:port","Metadata":{…}}. Services registered with
// etcd's endpoints manager or grpc-go's etcd resolver are found as they
// are, and a key bound to a lease goes away with its instance.
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tollgate/tollgate/discovery"
	"github.com/tollgate/tollgate/pipeline"
)

func init() {
	discovery.Register(discovery.Kind{Name: "etcd", Settings: func() any { return new(Settings) }, New: newProvider})
}

// maxResponseBytes bounds one answer from etcd (a page of the listing, a
// watch response): a member that sends more is failing, not listing.
const maxResponseBytes = 16 << 20

// Provider is the etcd registry client: one connection to the cluster,
// shared by every service that discovers through it.
type Provider struct {
	settings Settings
	tls      *tls.Config
	log      *zap.Logger

	// skipped counts values that were not usable endpoints, once per key
	// and revision.
	skipped atomic.Uint64

	mu     sync.Mutex
	client *clientv3.Client
	closed bool
}

// newProvider is the discovery.Factory: it validates and reads the TLS
// files but dials nothing; the client is made by the first Watch.
func newProvider(decode func(into any) error, env discovery.Env) (discovery.Provider, error) {
	var s Settings
	if err := decode(&s); err != nil {
		return nil, fmt.Errorf("discovery.etcd: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	p := &Provider{settings: s, log: env.Logger}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	p.log = p.log.With(zap.String("discovery", "etcd"))
	if !env.ForOtherHosts {
		cfg, err := s.TLS.config()
		if err != nil {
			return nil, fmt.Errorf("discovery.etcd: %w", err)
		}
		p.tls = cfg
	}
	return p, nil
}

// Target returns the watch on PREFIX + name + "/" for one service.
func (p *Provider) Target(service string, decode func(into any) error) (discovery.Target, error) {
	var ts TargetSettings
	if err := decode(&ts); err != nil {
		return nil, fmt.Errorf("service %q: discover: %w", service, err)
	}
	if err := validateName(ts.Name); err != nil {
		return nil, fmt.Errorf("service %q: %w", service, err)
	}
	return &target{p: p, service: service, prefix: p.settings.Prefix + ts.Name + "/"}, nil
}

// SkippedValues is how many values under the watched prefixes were not
// usable endpoints (malformed, oversized), each key and revision counted
// once.
func (p *Provider) SkippedValues() uint64 { return p.skipped.Load() }

var skippedValues = &pipeline.Family{Name: "tollgate_discovery_etcd_skipped_values_total",
	Help: "Values under the watched prefixes that were not usable instances (malformed, oversized), each key and revision once.",
	Type: pipeline.Counter}

// Report implements pipeline.Reporter.
func (p *Provider) Report(emit pipeline.Emit) { emit(skippedValues, float64(p.SkippedValues())) }

// Close ends the connection to etcd; the watches still running end with
// failures until their contexts end.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.client == nil {
		return nil
	}
	err := p.client.Close()
	p.client = nil
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

var errClosed = errors.New("etcd provider closed")

// connect returns the shared client, making it on first use. Making it
// authenticates when a username is set, which needs the cluster, so it
// can fail and is retried by the watches like any other failure.
func (p *Provider) connect() (*clientv3.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errClosed
	}
	if p.client != nil {
		return p.client, nil
	}
	s := p.settings
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   s.Endpoints,
		DialTimeout: s.DialTimeout.D(),
		// Keepalive pings find a connection whose peer vanished without
		// closing it, so the client redials instead of waiting on it.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: s.Timeout.D(),
		TLS:                  p.tls,
		Username:             s.Username,
		Password:             s.Password,
		MaxCallRecvMsgSize:   maxResponseBytes,
		// The client logs every redial and retry at Info and Warn; the
		// watches already report failures, so only its errors are kept.
		Logger: p.log.WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel)).Named("client"),
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd %v: %w", s.Endpoints, err)
	}
	p.client = c
	return c, nil
}
