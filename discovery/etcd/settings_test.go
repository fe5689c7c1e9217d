package etcd

import (
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pipeline"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/discovery"
)

func TestRegisteredUnderEtcd(t *testing.T) {
	t.Parallel()
	if !slices.Contains(discovery.Names(), "etcd") {
		t.Fatalf("providers %v, want etcd among them", discovery.Names())
	}
}

func TestSettingsDefaultsAndNormalisation(t *testing.T) {
	t.Parallel()
	p, err := newProvider(discovery.Decoder(node(t, "endpoints: [\"127.0.0.1:2379\"]\nprefix: /reg\n")), discovery.Env{})
	if err != nil {
		t.Fatal(err)
	}
	s := p.(*Provider).settings
	if s.Prefix != "/reg/" || s.DialTimeout.D() != 5*time.Second || s.Timeout.D() != 5*time.Second {
		t.Errorf("settings %+v", s)
	}
	p, err = newProvider(discovery.Decoder(node(t, "endpoints: [\"127.0.0.1:2379\"]\n")), discovery.Env{})
	if err != nil || p.(*Provider).settings.Prefix != "/services/" {
		t.Errorf("default prefix: %v %+v", err, p)
	}
	tg, err := p.Target("orders", discovery.Decoder(node(t, "from: etcd\nname: orders-v2\n")))
	if err != nil || tg.String() != "etcd /services/orders-v2/" {
		t.Errorf("target %v, %v", tg, err)
	}
}

func TestSettingsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]string{
		"endpoints: [\"a:1\"]\nendpoint: x\n":                          `line 2: unknown setting "endpoint"`,
		"endpoints: [\"a:1\"]\ntls:\n  ca: x.pem\n":                    `line 3: unknown setting "ca"`,
		"prefix: /services/\n":                                         "endpoints is required",
		"endpoints: []\n":                                              "endpoints is required",
		"endpoints: [\"a:1\"]\nprefix: services/\n":                    "must start with /",
		"endpoints: [\"nohost\"]\n":                                    "endpoints[0]",
		"endpoints: [\"a:0\"]\n":                                       "port 1..65535",
		"endpoints: [\"ftp://a:1\"]\n":                                 "scheme",
		"endpoints: [\"http://a:1\"]\ntls: {enabled: true}\n":          "http:// while tls",
		"endpoints: [\"a:1\"]\nusername: u\n":                          "go together",
		"endpoints: [\"a:1\"]\ntls: {cert_file: c.pem}\n":              "go together",
		"endpoints: [\"a:1\"]\ntimeout: soon\n":                        "invalid duration",
		"endpoints: [\"a:1\"]\ntls: {ca_file: " + notPEM + "}\n":       "no PEM certificate",
		"endpoints: [\"a:1\"]\ntls: {ca_file: " + dir + "/none.pem}\n": "ca_file",
	} {
		_, err := newProvider(discovery.Decoder(node(t, text)), discovery.Env{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", text, err, want)
		}
	}
}

// A file checked for another host names TLS files of that host: the
// factory reads none of them.
func TestSettingsForOtherHostsReadNoFile(t *testing.T) {
	t.Parallel()
	text := "endpoints: [\"a:1\"]\ntls: {ca_file: /nonexistent/ca.pem}\n"
	if _, err := newProvider(discovery.Decoder(node(t, text)), discovery.Env{ForOtherHosts: true}); err != nil {
		t.Errorf("for other hosts: %v", err)
	}
}

func TestDiscoverSettingsRefused(t *testing.T) {
	t.Parallel()
	p, err := newProvider(discovery.Decoder(node(t, "endpoints: [\"a:1\"]\n")), discovery.Env{})
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]string{
		"from: etcd\n":                         "discover.name is required",
		"from: etcd\nname: a/b\n":              "no /",
		"from: etcd\nname: \" a\"\n":           "no spaces",
		"from: etcd\nname: orders\nport: 80\n": `line 3: unknown setting "port"`,
	} {
		_, err := p.Target("orders", discovery.Decoder(node(t, text)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", text, err, want)
		}
	}
}

func TestPasswordIsMarkedSecret(t *testing.T) {
	t.Parallel()
	f, ok := reflectField(Settings{}, "Password")
	if !ok || f.Tag.Get("secret") != "true" {
		t.Errorf("Settings.Password tag %q: want secret:\"true\"", f.Tag)
	}
}

func reflectField(v any, name string) (reflect.StructField, bool) {
	return reflect.TypeOf(v).FieldByName(name)
}

// TestSkippedValuesReachTheMetrics: the provider's figures are found in
// a compiled snapshot the way the metrics writer finds them.
func TestSkippedValuesReachTheMetrics(t *testing.T) {
	t.Parallel()
	f, err := config.Parse("t.yaml", []byte("discovery:\n  cache_dir: "+t.TempDir()+"\n  etcd: {endpoints: [\"127.0.0.1:1\"]}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	comp := config.NewCompiler()
	defer comp.Close()
	snap, err := comp.Compile(f, "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	snap.Reporters(func(_ string, r pipeline.Reporter) {
		r.Report(func(f *pipeline.Family, _ float64, _ ...string) {
			found = found || f.Name == "tollgate_discovery_etcd_skipped_values_total"
		})
	})
	if !found {
		t.Fatal("the etcd provider's figures are not reported")
	}
}
