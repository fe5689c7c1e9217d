package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// EnvFlag is one TOLLGATE_* environment setting. Env overrides the file.
type EnvFlag struct {
	Name    string
	Default string
	Help    string
	apply   func(f *File, v string) error
}

func intFlag(dst func(*File) *int) func(*File, string) error {
	return func(f *File, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("want a non-negative integer, got %q", v)
		}
		*dst(f) = n
		return nil
	}
}

func durFlag(dst func(*File) *Duration) func(*File, string) error {
	return func(f *File, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration such as 5s, got %q", v)
		}
		*dst(f) = Duration(d)
		return nil
	}
}

// durValue checks a duration given in the environment.
func durValue(v string) error {
	if d, err := time.ParseDuration(v); err != nil || d < 0 {
		return fmt.Errorf("want a duration such as 5s, got %q", v)
	}
	return nil
}

// intValue checks a count given in the environment.
func intValue(v string) error {
	if n, err := strconv.Atoi(v); err != nil || n < 0 {
		return fmt.Errorf("want a non-negative integer, got %q", v)
	}
	return nil
}

// sectionFlag sets path (keys separated by dots) in the registered
// section's node (pipeline.Section) to v, once check accepts it: the
// section's owner decodes and validates it as if it were written in the
// file, which it overrides. tag is the YAML type v is given (!!str,
// !!int).
func sectionFlag(section, path, tag string, check func(string) error) func(*File, string) error {
	return func(f *File, v string) error {
		if err := check(v); err != nil {
			return err
		}
		if f.Features == nil {
			f.Features = map[string]yaml.Node{}
		}
		n, written := f.Features[section]
		if !written || n.Kind != yaml.MappingNode {
			n = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		at := &n
		keys := strings.Split(path, ".")
		for _, k := range keys[:len(keys)-1] {
			next := mapValue(at, k)
			if next == nil || next.Kind != yaml.MappingNode {
				next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				setMapValue(at, k, next)
			}
			at = next
		}
		setMapValue(at, keys[len(keys)-1], &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v})
		f.Features[section] = n
		return nil
	}
}

func strFlag(dst func(*File) *string) func(*File, string) error {
	return func(f *File, v string) error { *dst(f) = v; return nil }
}

func listFlag(dst func(*File) *[]string) func(*File, string) error {
	return func(f *File, v string) error {
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		*dst(f) = out
		return nil
	}
}

// EnvFlags lists every environment setting, in the order --help shows them.
// TOLLGATE_CONFIG (the file itself) is read by the command, not here.
var EnvFlags = []EnvFlag{
	{"TOLLGATE_LISTEN", ":8080", "address the gateway listens on", strFlag(func(f *File) *string { return &f.Listen })},
	{"TOLLGATE_WORKERS", "0 (one per core)", "cores the gateway works on: event loops on reactor (GOMAXPROCS one higher), GOMAXPROCS otherwise", intFlag(func(f *File) *int { return &f.Workers })},
	{"TOLLGATE_TRANSPORT", "reactor", "client-side transport: reactor (epoll event loops; netpoll is a synonym) or fasthttp", strFlag(func(f *File) *string { return &f.Transport })},
	{"TOLLGATE_IO_URING", "auto", "how the reactor transport's loops make socket calls: auto (in batches through io_uring when the kernel allows it), on (io_uring or no start) or off (one syscall each)", strFlag(func(f *File) *string { return &f.IOUring })},
	{"TOLLGATE_NODE_ID", "hostname:port", "this node's name in logs and the cluster", strFlag(func(f *File) *string { return &f.NodeID })},
	{"TOLLGATE_LOG_LEVEL", "info", "debug, info, warn or error", strFlag(func(f *File) *string { return &f.LogLevel })},
	{"TOLLGATE_ACCESS_LOG", "stdout", "access log: stdout, stderr, off or a file path", strFlag(func(f *File) *string { return &f.AccessLog.Path })},
	{"TOLLGATE_SHUTDOWN_TIMEOUT", "15s", "how long SIGTERM waits for in-flight requests", durFlag(func(f *File) *Duration { return &f.ShutdownTimeout })},
	{"TOLLGATE_DRAIN_DELAY", "2s", "after SIGTERM, how long /readyz says 503 before the listener closes", func(f *File, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration such as 2s, got %q", v)
		}
		dd := Duration(d)
		f.DrainDelay = &dd
		return nil
	}},
	{"TOLLGATE_MAX_HEADER_BYTES", "8192", "largest request header section (else 431)", intFlag(func(f *File) *int { return &f.Client.MaxHeaderBytes })},
	{"TOLLGATE_MAX_BODY_BYTES", "8388608", "largest request body (else 413)", func(f *File, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("want a non-negative integer, got %q", v)
		}
		f.Client.MaxBodyBytes = n
		return nil
	}},
	{"TOLLGATE_MAX_URI_BYTES", "8192", "longest request target (else 414)", intFlag(func(f *File) *int { return &f.Client.MaxURIBytes })},
	{"TOLLGATE_STREAM_BODY_BYTES", "1048576", "request bodies above this are streamed upstream, not buffered", intFlag(func(f *File) *int { return &f.Client.StreamBodyBytes })},
	{"TOLLGATE_HEADER_TIMEOUT", "5s", "time a client has to send a request's headers (slowloris guard)", durFlag(func(f *File) *Duration { return &f.Client.HeaderTimeout })},
	{"TOLLGATE_IDLE_TIMEOUT", "60s", "idle keep-alive connections are closed after this", durFlag(func(f *File) *Duration { return &f.Client.IdleTimeout })},
	{"TOLLGATE_BODY_TIMEOUT", "30s", "time a client has to send a request body", durFlag(func(f *File) *Duration { return &f.Client.BodyTimeout })},
	{"TOLLGATE_WRITE_TIMEOUT", "10s", "time allowed to write a response to the client", durFlag(func(f *File) *Duration { return &f.Client.WriteTimeout })},
	{"TOLLGATE_MAX_CONNS", "100000", "concurrent client connections; more are refused", intFlag(func(f *File) *int { return &f.Client.MaxConns })},
	{"TOLLGATE_H2C", "true", "HTTP/2 with prior knowledge (h2c) on the cleartext listener: true or false", func(f *File, v string) error {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		f.Client.H2C = &on
		return nil
	}},
	{"TOLLGATE_TRUSTED_PROXIES", "(none)", "comma-separated CIDRs whose X-Forwarded-For is believed", listFlag(func(f *File) *[]string { return &f.Client.TrustedProxies })},
	{"TOLLGATE_CONNECT_TIMEOUT", "1s", "default upstream connect timeout", sectionFlag("upstream", "timeouts.connect", "!!str", durValue)},
	{"TOLLGATE_READ_TIMEOUT", "3s", "default upstream read timeout", sectionFlag("upstream", "timeouts.read", "!!str", durValue)},
	{"TOLLGATE_TOTAL_TIMEOUT", "5s", "default upstream total timeout, retry included", sectionFlag("upstream", "timeouts.total", "!!str", durValue)},
	{"TOLLGATE_UPSTREAM_MAX_CONNS", "1024", "default connections per upstream instance", sectionFlag("upstream", "max_conns", "!!int", intValue)},
	{"TOLLGATE_REDIS", "(none: standalone)", "Redis address shared by the cluster's nodes", strFlag(func(f *File) *string { return &f.Cluster.Redis })},
	{"TOLLGATE_REDIS_PASSWORD", "(none)", "Redis password", strFlag(func(f *File) *string { return &f.Cluster.Password })},
	{"TOLLGATE_REDIS_TLS_CA", "(none)", "Redis over TLS: PEM file of the certificates that sign Redis's (any TOLLGATE_REDIS_TLS_* turns TLS on)", strFlag(func(f *File) *string { return &f.Cluster.TLS.CAFile })},
	{"TOLLGATE_REDIS_TLS_CERT", "(none)", "Redis over TLS: this node's certificate, for a Redis that asks for one", strFlag(func(f *File) *string { return &f.Cluster.TLS.CertFile })},
	{"TOLLGATE_REDIS_TLS_KEY", "(none)", "Redis over TLS: the key of TOLLGATE_REDIS_TLS_CERT", strFlag(func(f *File) *string { return &f.Cluster.TLS.KeyFile })},
	{"TOLLGATE_REDIS_TLS_SERVER_NAME", "(address host)", "Redis over TLS: the name Redis's certificate must carry", strFlag(func(f *File) *string { return &f.Cluster.TLS.ServerName })},
	{"TOLLGATE_NODES", "auto", "cluster size: auto (membership through Redis) or a number", strFlag(func(f *File) *string { return &f.Cluster.Nodes })},
	{"TOLLGATE_REDIS_BUDGET", "20ms", "longest a request waits for Redis before deciding alone", durFlag(func(f *File) *Duration { return &f.Cluster.Budget })},
	{"TOLLGATE_CONFIG_SOURCE", "file", "where the configuration comes from: file, or redis (pushed with tollgate config push)", strFlag(func(f *File) *string { return &f.Config.Source })},
	{"TOLLGATE_CONFIG_COPY", DefaultLocalCopy, "with config.source redis: where this node keeps the last configuration it ran", strFlag(func(f *File) *string { return &f.Config.LocalCopy })},
	{"TOLLGATE_SIGN_WINDOW", "300s", "allowed clock difference for signed requests", sectionFlag("signature", "window", "!!str", durValue)},
	{"TOLLGATE_ADMIN_LISTEN", "127.0.0.1:9901", "admin listener address, or off", strFlag(func(f *File) *string { return &f.Admin.Listen })},
	{"TOLLGATE_ADMIN_TOKEN", "(none)", "bearer token for the admin API (all of it but /healthz, /readyz, /metrics); required off loopback", strFlag(func(f *File) *string { return &f.Admin.Token })},
	{"TOLLGATE_METRICS", "on", "per-request metrics for /metrics and the dashboard: on or off", strFlag(func(f *File) *string { return &f.Admin.Metrics })},
}

// ApplyEnv overrides f with every TOLLGATE_* variable lookup finds.
func ApplyEnv(f *File, lookup func(string) (string, bool)) error {
	for _, fl := range EnvFlags {
		if v, ok := lookup(fl.Name); ok && v != "" {
			if err := fl.apply(f, v); err != nil {
				return fmt.Errorf("%s: %w", fl.Name, err)
			}
		}
	}
	return nil
}
