// Package dns is the `dns` service-discovery provider: a service's
// instances are the addresses of an A/AAAA name with a configured port,
// or the targets of SRV records with their ports, priorities and
// weights, asked of the configured name servers (a Kubernetes headless
// service, Consul's DNS interface) and asked again when the records'
// TTL, clamped to [min_ttl, max_ttl], runs out.
package dns

import (
	"context"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/discovery"
)

func init() {
	discovery.Register(discovery.Kind{Name: "dns", Settings: func() any { return new(Settings) }, New: newProvider})
}

// provider is one `discovery.dns` configuration: its servers and clamps,
// shared by every service that discovers through it.
type provider struct {
	cfg    config
	client *client
}

func newProvider(decode func(into any) error, env discovery.Env) (discovery.Provider, error) {
	var s Settings
	if err := decode(&s); err != nil {
		return nil, fmt.Errorf("discovery.dns: %w", err)
	}
	cfg, err := s.check(!env.ForOtherHosts)
	if err != nil {
		return nil, err
	}
	return &provider{cfg: cfg, client: &client{servers: cfg.servers, timeout: cfg.timeout}}, nil
}

// Target checks a service's `discover` settings; it sends no query.
func (p *provider) Target(service string, decode func(into any) error) (discovery.Target, error) {
	var s TargetSettings
	if err := decode(&s); err != nil {
		return nil, fmt.Errorf("services.%s.discover: %w", service, err)
	}
	tc, err := s.check()
	if err != nil {
		return nil, fmt.Errorf("services.%s.discover: %w", service, err)
	}
	return &target{
		cfg:      tc,
		clamp:    p.cfg,
		resolver: &resolver{client: p.client, family: tc.family},
	}, nil
}

// target is one service's name on the provider's servers.
type target struct {
	cfg      targetConfig
	clamp    config
	resolver *resolver
}

func (t *target) String() string {
	name := strings.TrimSuffix(t.cfg.name, ".")
	if t.cfg.kind == lookupSRV {
		return "dns SRV " + name
	}
	return fmt.Sprintf("dns A/AAAA %s port %d", name, t.cfg.port)
}

// resolve asks the target's records once; ttl is in seconds, unclamped.
func (t *target) resolve(ctx context.Context) ([]discovery.Instance, uint32, error) {
	if t.cfg.kind == lookupSRV {
		return t.resolver.resolveSRV(ctx, t.cfg.name)
	}
	return t.resolver.resolveAddr(ctx, t.cfg.name, t.cfg.port)
}
