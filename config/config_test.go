package config

import (
	"slices"

	_ "github.com/tollgate/tollgate/features"
	"github.com/tollgate/tollgate/upstream"

	"errors"
	"strings"
	"testing"
	"time"
)

func noEnv(string) (string, bool) { return "", false }

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const good = `listen: "127.0.0.1:8080"
client:
  max_header_bytes: 4096
  trusted_proxies: ["10.0.0.0/8"]
services:
  order-v1:
    instances:
      - {addr: "127.0.0.1:9001", weight: 3}
      - {addr: "127.0.0.1:9002"}
    balance: least_conn
    timeouts: {connect: 500ms, read: 2s, total: 4s}
    retry: 0
routes:
  - name: order
    priority: 10
    match: {host: api.example.com, prefix: /api/order/, methods: [GET, POST]}
    service: order-v1
  - name: exact
    match: {path: /health}
    service: order-v1
default_service: order-v1
`

func compile(t *testing.T, src string, lookup func(string) (string, bool)) (*Snapshot, error) {
	t.Helper()
	f, err := Parse("test.yaml", []byte(src), lookup)
	if err != nil {
		return nil, err
	}
	if err := ApplyEnv(f, lookup); err != nil {
		return nil, err
	}
	f.Defaults()
	return NewCompiler().Compile(f, "test.yaml")
}

func TestCompileGood(t *testing.T) {
	s, err := compile(t, good, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 1 || len(s.Routes) != 2 || s.Default == nil {
		t.Fatalf("snapshot: version %d routes %d default %v", s.Version, len(s.Routes), s.Default != nil)
	}
	f := s.File
	if f.Client.MaxHeaderBytes != 4096 || f.Client.MaxBodyBytes != 8<<20 || f.Client.HeaderTimeout.D() != 5*time.Second {
		t.Fatalf("client settings/defaults wrong: %+v", f.Client)
	}
	svc := (*f.sections["services"].(*map[string]*upstream.ServiceSettings))["order-v1"]
	if svc.Timeouts.Connect.D() != 500*time.Millisecond || *svc.Retry != 0 || svc.Instances[1].Weight != 1 {
		t.Fatalf("service settings wrong: %+v", svc)
	}
	if !s.Edge.Trusted.Contains(mustAddr("10.1.2.3")) || s.Edge.Trusted.Contains(mustAddr("11.1.2.3")) {
		t.Fatal("trusted proxies not compiled")
	}
}

func TestEnvOverridesFile(t *testing.T) {
	s, err := compile(t, good, env(map[string]string{
		"TOLLGATE_LISTEN": "127.0.0.1:9999", "TOLLGATE_MAX_BODY_BYTES": "1024", "TOLLGATE_HEADER_TIMEOUT": "2s",
		"TOLLGATE_TRANSPORT": "fasthttp", "TOLLGATE_TRUSTED_PROXIES": "192.168.0.0/16, 10.0.0.1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	f := s.File
	if f.Listen != "127.0.0.1:9999" || f.Client.MaxBodyBytes != 1024 || f.Client.HeaderTimeout.D() != 2*time.Second ||
		f.Transport != "fasthttp" || len(f.Client.TrustedProxies) != 2 {
		t.Fatalf("env not applied: %+v", f)
	}
	if _, err := compile(t, good, env(map[string]string{"TOLLGATE_IDLE_TIMEOUT": "soon"})); err == nil ||
		!strings.Contains(err.Error(), "TOLLGATE_IDLE_TIMEOUT") {
		t.Fatalf("bad env value: %v", err)
	}
}

func TestExpandsEnvReferences(t *testing.T) {
	src := strings.Replace(good, `"127.0.0.1:9001"`, `"${UP}"`, 1)
	s, err := compile(t, src, env(map[string]string{"UP": "127.0.0.1:7777"}))
	if err != nil {
		t.Fatal(err)
	}
	if servicesOf(s)["order-v1"].Instances()[0].Addr != "127.0.0.1:7777" {
		t.Fatal("${UP} not expanded")
	}
}

func TestErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		line      int
		msg       string
	}{
		{"typo", "listen: \":1\"\nroutes:\n  - name: a\n    priorty: 3\n", 4, `unknown setting "routes[0].priorty"`},
		{"not yet", "routes:\n  - name: a\n    match: {path: /}\n    public: true\n    service: s\n", 4, "not supported"},
		{"bad duration", "client:\n  idle_timeout: forever\n", 2, "invalid duration"},
		{"bad type", "client:\n  max_conns: lots\n", 2, `expected a whole number, got "lots"`},
		{"unknown service", "services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\nroutes:\n  - name: a\n    match: {path: /}\n    service: nope\n", 6, `service "nope" is not defined`},
		{"path and prefix", "services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\nroutes:\n  - name: a\n    match: {path: /, prefix: /x}\n    service: s\n", 4, "exactly one of path, prefix or regex"},
		{"bad addr", "services:\n  s:\n    instances: [{addr: \"nohost\"}]\n", 3, "host:port"},
		{"timeouts", "services:\n  s:\n    instances: [{addr: \"127.0.0.1:1\"}]\n    timeouts: {read: 9s, total: 5s}\n", 3, "must fit within total"},
		{"syntax", "listen: [\n", 1, "did not find"},
		{"bad when", "services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\nroutes:\n  - name: a\n    match:\n      path: /\n      when: 'query.a == \"1\" && && header.b'\n    service: s\n", 7, "when"},
		{"two actions", "services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\nroutes:\n  - name: a\n    match: {path: /}\n    service: s\n    mock: {responses: [{body: x}]}\n", 4, "exactly one of service, split, mock or offline"},
		{"split sum", "services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\n  t: {instances: [{addr: \"127.0.0.1:2\"}]}\nroutes:\n  - name: a\n    match: {prefix: /}\n    split: [{service: s, percent: 30}, {service: t, percent: 30}]\n", 5, "add up to 60.00"},
		{"split keys", "services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\n  t: {instances: [{addr: \"127.0.0.1:2\"}]}\nroutes:\n  - name: a\n    match: {prefix: /}\n    split: [{service: s, percent: 5, key: header.A}, {service: t, key: cookie.B}]\n", 5, "different keys"},
		{"bad regex", "services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\nroutes:\n  - name: a\n    match: {regex: '(('}\n    service: s\n", 4, "regex"},
		{"bad acl", "ip_acl: {deny: [\"10.0.0.0/40\"]}\n", 1, "ip_acl.deny"},
		{"log file size", "listen: \":1\"\naccess_log:\n  path: /var/log/a.log\n  max_file_bytes: 100\n", 4, "max_file_bytes 100: want 0"},
		{"log backups", "access_log:\n  path: /var/log/a.log\n  max_file_bytes: 1048576\n  max_backups: -2\n", 4, "max_backups -2"},
		{"log backups alone", "listen: \":1\"\naccess_log: {path: /var/log/a.log, max_backups: 3}\n", 2, "only with max_file_bytes"},
		{"admin host with port", "admin:\n  hosts:\n    - ops.example.com\n    - ops.example.com:9901\n", 4, "without a port"},
		{"admin host not a name", "admin: {hosts: [\"*.example.com\"]}\n", 1, "not a host name"},
		{"rewrite on mock", "routes:\n  - name: a\n    match: {path: /}\n    rewrite: {path: /b}\n    mock: {responses: [{body: x}]}\n", 4, "rewrite applies only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compile(t, tc.src, noEnv)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *config.Error", err)
			}
			if ce.Line != tc.line || !strings.Contains(ce.Msg, tc.msg) {
				t.Fatalf("got %q (line %d), want line %d containing %q", err, ce.Line, tc.line, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "test.yaml:") {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
}

func TestVersionsIncreaseAndFailuresUseNone(t *testing.T) {
	c := NewCompiler()
	load := func(src string) (*Snapshot, error) {
		f, err := Parse("t", []byte(src), noEnv)
		if err != nil {
			return nil, err
		}
		f.Defaults()
		return c.Compile(f, "t")
	}
	a, err := load(good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := load(good + "routes: 3\n"); err == nil {
		t.Fatal("bad config accepted")
	}
	b, err := load(good)
	if err != nil {
		t.Fatal(err)
	}
	if a.Version != 1 || b.Version != 2 {
		t.Fatalf("versions %d, %d; want 1, 2", a.Version, b.Version)
	}
	// The same backend keeps its instance (and pool) across snapshots.
	if servicesOf(a)["order-v1"].Instances()[0] != servicesOf(b)["order-v1"].Instances()[0] {
		t.Fatal("instance not shared across reload")
	}
}

func TestDemoCompiles(t *testing.T) {
	s, err := NewCompiler().Load("", []byte(Demo), env(map[string]string{"TOLLGATE_DEMO_UPSTREAM": "127.0.0.1:1234"}))
	if err != nil {
		t.Fatal(err)
	}
	if servicesOf(s)["demo"].Instances()[0].Addr != "127.0.0.1:1234" {
		t.Fatal("demo upstream not substituted")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(Demo))
	f.Add([]byte("routes:\n  - name: a\n    priorty: 3\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse("fuzz", src, noEnv)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		file.Defaults()
		_, _ = NewCompiler().Compile(file, "fuzz")
	})
}

// TestReloadKeepsStateOfUnchangedServices: an instance named with the same
// settings is the same object (its pool and health carry over); changed
// settings give a fresh one.
func TestReloadKeepsStateOfUnchangedServices(t *testing.T) {
	c := NewCompiler()
	build := func(read string) *Snapshot {
		f, err := Parse("t", []byte("services:\n  a: {instances: [{addr: \"127.0.0.1:1\"}], timeouts: {read: "+read+"}}\n  b: {instances: [{addr: \"127.0.0.1:2\"}]}\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		f.Defaults()
		s, err := c.Compile(f, "t")
		if err != nil {
			t.Fatal(err)
		}
		c.Release(s)
		return s
	}
	s1 := build("1s")
	s2 := build("1s")
	if servicesOf(s1)["a"].Instances()[0] != servicesOf(s2)["a"].Instances()[0] || servicesOf(s1)["b"].Instances()[0] != servicesOf(s2)["b"].Instances()[0] {
		t.Fatal("an unchanged service got fresh instances")
	}
	s3 := build("2s")
	if servicesOf(s3)["a"].Instances()[0] == servicesOf(s2)["a"].Instances()[0] {
		t.Fatal("a changed service kept its old instance")
	}
	if servicesOf(s3)["b"].Instances()[0] != servicesOf(s2)["b"].Instances()[0] {
		t.Fatal("a service the reload did not touch lost its instance")
	}
}

// TestOneOwnerPerSetting: each setting is checked by the package that owns
// it, once, and its error still names the line.
func TestOneOwnerPerSetting(t *testing.T) {
	for _, c := range []struct {
		yaml string
		line int
		want string
	}{
		{"services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}], retry: 2}\n", 2, "retry must be 0 or 1"},
		{"services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\nroutes:\n  - match: {path: /}\n    service: s\n", 4, "has no name"},
		{"services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\nroutes:\n  - {name: a, match: {path: /}, service: s}\n  - {name: a, match: {path: /b}, service: s}\n", 5, "defined twice"},
		{"services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\nroutes:\n  - {name: a, match: {path: /, host: \"a:80\"}, service: s}\n", 4, "host"},
	} {
		_, err := compile(t, c.yaml, env(nil))
		var ce *Error
		if !errors.As(err, &ce) || ce.Line != c.line || !strings.Contains(ce.Msg, c.want) {
			t.Errorf("%q: %v, want line %d with %q", c.yaml, err, c.line, c.want)
		}
	}
	// not_found without a status is a 404, as documented.
	s, err := compile(t, "not_found: {body: '{\"code\":404}'}\n", env(nil))
	if err != nil || s.NotFound == nil || s.NotFound.Status != 404 {
		t.Fatalf("not_found without status: %v", err)
	}
}

func TestRestartOnlyChanges(t *testing.T) {
	load := func(src string) *File {
		f, err := Parse("t", []byte(src), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		f.Defaults()
		return f
	}
	a := load("listen: \":1\"\nclient: {max_body_bytes: 100, trusted_proxies: [\"10.0.0.0/8\"]}\n")
	b := load("listen: \":2\"\nclient: {max_body_bytes: 200, trusted_proxies: [\"10.0.0.0/16\"]}\n")
	got := RestartOnlyChanges(a, b)
	if strings.Join(got, ",") != "listen,client.max_body_bytes" {
		t.Fatalf("restart-only changes %q", got)
	}
	if len(RestartOnlyChanges(a, a)) != 0 {
		t.Fatal("an unchanged file reported changes")
	}
	// The access log's rotation takes effect at start; moving its lines
	// in the file is no change.
	c := load("access_log: {path: a.log, max_file_bytes: 65536}\n")
	d := load("listen: \":8080\"\n\naccess_log:\n  path: a.log\n  max_file_bytes: 65536\n  max_backups: 5\n")
	e := load("access_log: {path: a.log, max_file_bytes: 65537}\n")
	if got := RestartOnlyChanges(c, d); len(got) != 0 {
		t.Fatalf("the same access log settings reported as %q", got)
	}
	if got := RestartOnlyChanges(c, e); strings.Join(got, ",") != "access_log" {
		t.Fatalf("access log rotation change reported as %q", got)
	}
	// The admin listener is built at start: its names too.
	h1 := load("admin: {hosts: [ops.example.com]}\n")
	h2 := load("admin:\n  hosts: [ops.example.com, \"[2001:db8::1]\"]\n")
	if got := RestartOnlyChanges(h1, h2); strings.Join(got, ",") != "admin" {
		t.Fatalf("admin.hosts change reported as %q", got)
	}
	if !slices.Equal(h2.Admin.Hosts, []string{"ops.example.com", "[2001:db8::1]"}) {
		t.Fatalf("admin.hosts read as %q", h2.Admin.Hosts)
	}
	if c.AccessLog.MaxBackups != 5 || a.AccessLog.MaxBackups != 0 {
		t.Fatalf("max_backups defaults: %d with rotation, %d without", c.AccessLog.MaxBackups, a.AccessLog.MaxBackups)
	}
}
