// Package config reads the YAML file operators write, checks it (every error
// names its line), applies TOLLGATE_* environment overrides, and compiles it
// into an immutable, versioned Snapshot that the server swaps atomically.
package config

import (
	"fmt"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// File is the configuration as written. Zero values mean "use the default"
// noted beside each field; Defaults fills them in.
type File struct {
	Listen  string `yaml:"listen"`  // default ":8080"
	Workers int    `yaml:"workers"` // GOMAXPROCS; 0 = one per core
	NodeID  string `yaml:"node_id"` // default hostname:port
	// Sections their owners register (tls, status, …) are in Features.
	Transport string `yaml:"transport"` // reactor (default; "netpoll" is a synonym) | fasthttp
	// IOUring is how the reactor transport's event loops make their
	// socket calls: auto (default: in batches through an io_uring when
	// the kernel allows one, else one syscall each), on (an io_uring or
	// no start) or off (one syscall each).
	IOUring  string `yaml:"io_uring"`
	LogLevel string `yaml:"log_level"` // debug | info (default) | warn | error
	// ShutdownTimeout bounds the drain on SIGTERM; default 15s.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// DrainDelay is how long, after SIGTERM, the gateway goes on accepting
	// while /readyz answers 503 and every answer carries Connection: close,
	// so a load balancer takes the node out and keep-alive clients move
	// before the listener closes; default 2s, 0s for none.
	DrainDelay *Duration `yaml:"drain_delay"`

	Client    Client    `yaml:"client"`
	Admin     Admin     `yaml:"admin"`
	AccessLog AccessLog `yaml:"access_log"`

	// Features are the top-level settings of registered features that
	// screen every request before routing (ip_acl), and the registered
	// sections (status, upstream, services, …), keyed by name; each
	// owner decodes and validates its own.
	Features map[string]yaml.Node `yaml:",inline"`

	Cluster Cluster `yaml:"cluster"`
	Config  Source  `yaml:"config"` // where the configuration comes from (source.go)

	Routes         []*Route   `yaml:"routes"`
	DefaultService string     `yaml:"default_service"`
	Fallbacks      []Fallback `yaml:"fallbacks"` // weighted choice when no route and no default
	NotFound       *Answer    `yaml:"not_found"`
	// Watch re-reads the file when it changes (polled once a second);
	// default true.
	Watch *bool `yaml:"watch"`

	// expanded are the values ${NAME} references put in, kept out of the
	// messages about this file.
	expanded []expanded
	// sections are the registered top-level sections' configs as their
	// owners provisioned them (defaults written in), by key.
	sections map[string]any
	// transportAt is the transport setting as written (transport.go).
	transportAt transportSetting
	// topKeys are the top-level settings the file wrote, merges followed;
	// configLine is where its config section starts.
	topKeys    map[string]bool
	configLine int
	// doc is the document as parsed, to place errors found later.
	doc *yaml.Node
}

// Client is what a client may send and how long the gateway waits for it.
type Client struct {
	MaxHeaderBytes int      `yaml:"max_header_bytes"` // default 8192 → 431
	MaxBodyBytes   int64    `yaml:"max_body_bytes"`   // default 8 MiB → 413
	MaxURIBytes    int      `yaml:"max_uri_bytes"`    // default 8192 → 414
	HeaderTimeout  Duration `yaml:"header_timeout"`   // default 5s (slowloris guard)
	IdleTimeout    Duration `yaml:"idle_timeout"`     // default 60s
	WriteTimeout   Duration `yaml:"write_timeout"`    // default 10s
	// BodyTimeout is the time a client has to send a request body once its
	// headers arrived; default 30s.
	BodyTimeout Duration `yaml:"body_timeout"`
	MaxConns    int      `yaml:"max_conns"` // default 100000
	// StreamBodyBytes: request bodies larger than this are streamed to the
	// upstream instead of buffered whole; default 1 MiB.
	StreamBodyBytes int      `yaml:"stream_body_bytes"`
	TrustedProxies  []string `yaml:"trusted_proxies"` // CIDRs whose X-Forwarded-For is believed
	// Internal prefixes stripped from client requests; default
	// ["X-Internal-"] and ["internal_"]. Set to [] to strip nothing.
	InternalHeaderPrefixes *[]string `yaml:"internal_header_prefixes"`
	InternalQueryPrefixes  *[]string `yaml:"internal_query_prefixes"`
	// H2C serves HTTP/2 with prior knowledge on the cleartext listener
	// (gRPC clients and h2c load balancers); default true. Off, a client
	// opening with the HTTP/2 preface gets a GOAWAY (HTTP_1_1_REQUIRED).
	H2C *bool `yaml:"h2c"`
}

// ServesH2C reports whether the cleartext listener serves HTTP/2 with
// prior knowledge (h2c defaults to on).
func (c *Client) ServesH2C() bool { return c.H2C == nil || *c.H2C }

// Admin is the operators' listener.
type Admin struct {
	Listen string `yaml:"listen"`              // default 127.0.0.1:9901; "off" disables
	Token  string `yaml:"token" secret:"true"` // bearer token; required for changes
	// Metrics is on (default: per-request figures for /metrics and the
	// dashboard) or off.
	Metrics string `yaml:"metrics"`
	// Hosts are names the listener answers to besides its listen address,
	// the address a request arrived on and loopback (localhost,
	// 127.0.0.1, [::1]): the names operators reach it by. Any other Host
	// is refused (421), so a page whose name was rebound to this address
	// cannot read the admin API from a browser.
	Hosts []string `yaml:"hosts"`
}

// AccessLog says where request lines go.
type AccessLog struct {
	Path string `yaml:"path"` // stdout (default) | stderr | off | a file path
	// Buffer is the number of lines queued for the writer before new ones are
	// dropped (and counted); default 65536.
	Buffer int `yaml:"buffer"`
	// MaxFileBytes rotates a file log by size: before a line would take the
	// file past it, the file becomes path.1 (path.1 becomes path.2, …) and
	// a fresh one starts. 0 (default): no rotation by size (logrotate and
	// SIGUSR1 instead). Ignored for stdout and stderr.
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxBackups is how many rotated files are kept, the oldest deleted;
	// default 5 with max_file_bytes.
	MaxBackups int `yaml:"max_backups"`

	// Where the sizes were written, for errors.
	maxBytesLine, maxBackupsLine int
}

// UnmarshalYAML records where the rotation settings were written.
func (a *AccessLog) UnmarshalYAML(n *yaml.Node) error {
	type plain AccessLog
	if err := n.Decode((*plain)(a)); err != nil {
		return err
	}
	if v := mapValue(n, "max_file_bytes"); v != nil {
		a.maxBytesLine = v.Line
	}
	if v := mapValue(n, "max_backups"); v != nil {
		a.maxBackupsLine = v.Line
	}
	return nil
}

// settings is a without the places it was written: what a reload compares.
func (a AccessLog) settings() AccessLog {
	a.maxBytesLine, a.maxBackupsLine = 0, 0
	return a
}

// Cluster is how nodes share state.
type Cluster struct {
	// Redis is "host:port" (several, comma-separated or as a list in a
	// future version, for Redis Cluster); empty = standalone.
	Redis    string `yaml:"redis"`
	Password string `yaml:"password" secret:"true"`
	// TLS reaches Redis over TLS (see ClientTLS).
	TLS ClientTLS `yaml:"tls"`
	// Nodes is "auto" (membership through Redis: each node heartbeats
	// and counts the live ones) or a fixed count; local limits are split
	// by it.
	Nodes string `yaml:"nodes"`
	// Budget bounds the one Redis call a request may wait for (the nonce
	// claim); default 20ms. Past it the node decides alone.
	Budget Duration `yaml:"budget"`
}

// FixedNodes returns the configured node count, or 0 for "auto".
func (c Cluster) FixedNodes() int {
	n, err := strconv.Atoi(c.Nodes)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// Route is one routing rule. Its action is exactly one of service, split,
// mock or offline.
type Route struct {
	Name     string `yaml:"name"`
	Priority int    `yaml:"priority"`
	Match    Match  `yaml:"match"`

	Service    string      `yaml:"service"`
	Split      []SplitItem `yaml:"split"`
	SplitForce *SplitForce `yaml:"split_force"`
	Mock       *Mock       `yaml:"mock"`
	Offline    *Offline    `yaml:"offline"`

	// Features are the route's settings of registered features (ip_acl,
	// rewrite, deprecated, …), keyed by name; each feature decodes and
	// validates its own (see pipeline.Register).
	Features map[string]yaml.Node `yaml:",inline"`

	// Headers says which of the client's header fields reach the backend:
	// allow (only these, plus Content-Type and Content-Encoding) or deny.
	// The gateway's own fields (X-Forwarded-*, X-Real-IP, X-Consumer,
	// traceparent, …) are set after it and cannot be removed by it.
	Headers *HeaderPolicy `yaml:"headers"`
	// ForwardAuthorization and ForwardCookies (default true) let the
	// client's Authorization and Cookie fields through to the backend.
	ForwardAuthorization *bool `yaml:"forward_authorization"`
	ForwardCookies       *bool `yaml:"forward_cookies"`

	Line int `yaml:"-"`
	// WhenLine and WhenCol locate the first character of the match.when
	// expression in the file, so its errors point into it.
	WhenLine, WhenCol int `yaml:"-"`
}

// HeaderPolicy is a route's allow- or deny-list of client header names
// (case-insensitive; '_' and '-' are the same).
type HeaderPolicy struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

// SplitItem is one share of a traffic split.
type SplitItem struct {
	Service string `yaml:"service"`
	// Metadata limits the share to the service's instances whose
	// registry metadata has every key with its value (version: v2), so a
	// canary follows the instances a deploy registers. split_force names
	// such a share SERVICE@KEY=VALUE[,KEY=VALUE…] (keys in order).
	Metadata map[string]string `yaml:"metadata"`
	// Percent of traffic (0..100); the item without one takes the rest.
	Percent *float64 `yaml:"percent"`
	// Key makes the split sticky: hash(key) mod 100 picks the share, so a
	// user always lands on the same service. header.X, cookie.X or query.X.
	Key string `yaml:"key"`
}

// SplitForce names a header and/or cookie whose value, when it names one
// of the split's services, sends the request there (testers forcing a
// version).
type SplitForce struct {
	Header string `yaml:"header"`
	Cookie string `yaml:"cookie"`
}

// Mock makes the route answer by itself.
type Mock struct {
	Pick      string   `yaml:"pick"` // first (default) | random | round_robin
	Responses []Answer `yaml:"responses"`
}

// Offline retires an API version: a 308 to the successor, or a fixed answer.
type Offline struct {
	Successor string  `yaml:"successor"` // replaces the route's prefix in the redirect
	Answer    *Answer `yaml:"answer"`
}

// Fallback is one weighted choice when no route matches.
type Fallback struct {
	Service string `yaml:"service"`
	Weight  int    `yaml:"weight"` // default 1
}

// Match says which requests a route takes. Exactly one of path, prefix
// and regex is set.
type Match struct {
	Host    string   `yaml:"host"`   // exact, or *.suffix
	Path    string   `yaml:"path"`   // exact path
	Prefix  string   `yaml:"prefix"` // path prefix
	Regex   string   `yaml:"regex"`  // RE2 over the normalized path
	Methods []string `yaml:"methods"`
	When    string   `yaml:"when"` // condition expression (see docs/config.md)
}

// Answer is a fixed response.
type Answer struct {
	Status      int               `yaml:"status"` // default 200
	Body        string            `yaml:"body"`
	ContentType string            `yaml:"content_type"` // default application/json
	Headers     map[string]string `yaml:"headers"`
	Delay       Duration          `yaml:"delay"` // mocks only: answer after this long
}

// UnmarshalYAML records where the route (and its condition) was written,
// for error messages.
func (r *Route) UnmarshalYAML(n *yaml.Node) error {
	type plain Route
	if err := n.Decode((*plain)(r)); err != nil {
		return err
	}
	r.Line = n.Line
	if m := mapValue(n, "match"); m != nil {
		if w := mapValue(m, "when"); w != nil {
			r.WhenLine, r.WhenCol = w.Line, w.Column
			if w.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 {
				r.WhenCol++ // the expression starts after the quote
			}
		}
	}
	return nil
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// Duration is a time.Duration written the Go way ("250ms", "5s").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &lineError{n.Line, n.Column, "expected a duration such as \"5s\""}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return &lineError{n.Line, n.Column, fmt.Sprintf("invalid duration %q (want e.g. \"250ms\", \"5s\")", n.Value)}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration back in Go form.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }
