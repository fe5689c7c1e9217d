package tracing

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/tollgate/tollgate/internal/clienttls"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/trace/otlp"
)

// Settings is the top-level `tracing:` section.
//
//	tracing:
//	  otlp: {endpoint: "collector:4317", protocol: grpc}
//	  sample: 0.1
//	  slow: 500ms
//	  service_name: edge
//	  resource: {deployment.environment: prod}
//	  propagation: {read: [w3c, b3], write: [w3c]}
type Settings struct {
	OTLP OTLP `yaml:"otlp"`
	// Sample is the share of new traces kept (0..1, default 1); a caller's
	// sampled flag decides for the traces it started.
	Sample *float64 `yaml:"sample"`
	// Slow keeps every request at least this slow (0: none), and Errors
	// every request answered 5xx (default true), Refusals every request the
	// gateway refused (4xx of its own), whatever the head decision said.
	Slow     *pipeline.Duration `yaml:"slow"`
	Errors   *bool              `yaml:"errors"`
	Refusals bool               `yaml:"refusals"`
	// ServiceName is the resource's service.name (default tollgate);
	// Resource adds attributes of the operator's.
	ServiceName string            `yaml:"service_name"`
	Resource    map[string]string `yaml:"resource"`
	Propagation Propagation       `yaml:"propagation"`
}

// OTLP is where spans go.
type OTLP struct {
	// Endpoint: host:port (gRPC; http:// or https:// to say how), or
	// http(s)://host:port[/path] for protocol http (path default
	// /v1/traces). Empty: spans go nowhere, and no request is recorded.
	Endpoint string `yaml:"endpoint"`
	// Protocol is grpc (default) or http (HTTP/protobuf).
	Protocol string `yaml:"protocol"`
	// Headers go with every export (a backend's API key).
	Headers map[string]string  `yaml:"headers" secret:"true"`
	TLS     clienttls.Settings `yaml:"tls"`
	// Timeout bounds one export call (default 10s).
	Timeout *pipeline.Duration `yaml:"timeout"`
	// Queue bounds the requests waiting for export (default 2048): past
	// it they are dropped and counted, never waited for.
	Queue int `yaml:"queue"`
	// Batch is the most requests one export carries (default 512);
	// BatchDelay the longest one waits for its batch (default 1s).
	Batch      int                `yaml:"batch"`
	BatchDelay *pipeline.Duration `yaml:"batch_delay"`
	// Workers export in parallel (default 1).
	Workers int `yaml:"workers"`
	// Retry is the backoff between tries of a batch the backend may take
	// later (defaults 1s, 30s, 1m).
	Retry Retry `yaml:"retry"`
}

// Retry is a batch's backoff.
type Retry struct {
	Initial    *pipeline.Duration `yaml:"initial"`
	Max        *pipeline.Duration `yaml:"max"`
	MaxElapsed *pipeline.Duration `yaml:"max_elapsed"`
}

// Propagation names the trace context formats read from a request (the
// first found wins, in the order given) and written upstream.
type Propagation struct {
	Read  []string `yaml:"read"`
	Write []string `yaml:"write"`
}

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key:       "tracing",
		Config:    func() any { return new(Settings) },
		Provision: provision,
	})
}

func provision(env *pipeline.Env, cfg any) error {
	s := cfg.(*Settings)
	if err := s.defaults(); err != nil {
		return err
	}
	node, _ := pipeline.NodeKey.Get(env)
	t := &Tracer{node: node}
	if err := t.configure(s); err != nil {
		return err
	}
	if s.OTLP.Endpoint != "" {
		exp, err := exporter(env, s)
		if err != nil {
			return err
		}
		if exp != nil {
			t.sink, t.exp = exp, exp
		}
	}
	tracerKey.Set(env, t)
	return nil
}

func (s *Settings) defaults() error {
	if s.Sample == nil {
		s.Sample = ptr(1.0)
	}
	if *s.Sample < 0 || *s.Sample > 1 {
		return fmt.Errorf("tracing.sample %v: want a share between 0 and 1", *s.Sample)
	}
	if s.Slow == nil {
		s.Slow = ptr(pipeline.Duration(0))
	}
	if s.Errors == nil {
		s.Errors = ptr(true)
	}
	if s.ServiceName == "" {
		s.ServiceName = "tollgate"
	}
	if s.Propagation.Read == nil {
		s.Propagation.Read = []string{"w3c", "b3"}
	}
	if s.Propagation.Write == nil {
		s.Propagation.Write = []string{"w3c"}
	}
	o := &s.OTLP
	if o.Protocol == "" {
		o.Protocol = "grpc"
	}
	if o.Protocol != "grpc" && o.Protocol != "http" {
		return fmt.Errorf("tracing.otlp.protocol %q: want grpc or http", o.Protocol)
	}
	for name, v := range map[string]int{"queue": o.Queue, "batch": o.Batch, "workers": o.Workers} {
		if v < 0 {
			return fmt.Errorf("tracing.otlp.%s %d must not be negative", name, v)
		}
	}
	if o.Queue == 0 {
		o.Queue = 2048
	}
	if o.Batch == 0 {
		o.Batch = 512
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	o.Timeout = orDefault(o.Timeout, 10*time.Second)
	o.BatchDelay = orDefault(o.BatchDelay, time.Second)
	o.Retry.Initial = orDefault(o.Retry.Initial, time.Second)
	o.Retry.Max = orDefault(o.Retry.Max, 30*time.Second)
	o.Retry.MaxElapsed = orDefault(o.Retry.MaxElapsed, time.Minute)
	return nil
}

// exporter returns the exporter for s's settings: the running one when a
// reload left them as they were, so its queue and connections carry on.
func exporter(env *pipeline.Env, s *Settings) (*otlp.Exporter, error) {
	o := &s.OTLP
	tlsc, err := o.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("tracing.otlp.tls: %v", err)
	}
	var send otlp.Sender
	if o.Protocol == "http" {
		send, err = otlp.NewHTTP(o.Endpoint, o.Headers, tlsc)
	} else {
		send, err = otlp.NewGRPC(o.Endpoint, o.Headers, tlsc)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing.otlp: %v", err)
	}
	if env.Offline {
		closeSender(send)
		return nil, nil
	}
	res := [][2]string{{"service.name", s.ServiceName}}
	for _, k := range slices.Sorted(maps.Keys(s.Resource)) {
		if k != "service.name" {
			res = append(res, [2]string{k, s.Resource[k]})
		}
	}
	if host, err := os.Hostname(); err == nil && s.Resource["host.name"] == "" {
		res = append(res, [2]string{"host.name", host})
	}
	cfg := otlp.Config{Send: send, Resource: otlp.NewResource(res), QueueSize: o.Queue,
		BatchSize: o.Batch, BatchDelay: o.BatchDelay.D(), Workers: o.Workers,
		Retry: otlp.Backoff{Initial: o.Retry.Initial.D(), Max: o.Retry.Max.D(),
			MaxElapsed: o.Retry.MaxElapsed.D(), Timeout: o.Timeout.D()},
		Logger: env.Logger.Named("tracing")}
	key := "tracing.otlp|" + pipeline.Digest(struct {
		OTLP     OTLP
		Resource [][2]string
	}{OTLP{Endpoint: o.Endpoint, Protocol: o.Protocol, Headers: o.Headers, TLS: o.TLS.WithoutPlace(),
		Timeout: o.Timeout, Queue: o.Queue, Batch: o.Batch, BatchDelay: o.BatchDelay, Workers: o.Workers, Retry: o.Retry}, res})
	made := false
	exp := env.State.Get(key, func() (any, func()) {
		made = true
		e := otlp.New(cfg)
		return e, e.Close
	}).(*otlp.Exporter)
	if !made {
		closeSender(send)
	}
	return exp, nil
}

func closeSender(s otlp.Sender) {
	if c, ok := s.(interface{ Close() }); ok {
		c.Close()
	}
}

func orDefault(d *pipeline.Duration, def time.Duration) *pipeline.Duration {
	if d == nil || *d <= 0 {
		return ptr(pipeline.Duration(def))
	}
	return d
}

func ptr[T any](v T) *T { return &v }
