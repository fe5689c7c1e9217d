package edgetls_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/edgetls"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

func noEnv(string) (string, bool) { return "", false }

// compile loads src as a node loads its file.
func compile(t *testing.T, src string) (*config.Snapshot, error) {
	t.Helper()
	f, err := config.Parse("t.yaml", []byte(src), noEnv)
	if err != nil {
		return nil, err
	}
	f.Defaults()
	c := config.NewCompiler()
	t.Cleanup(c.Close)
	return c.Compile(f, "t.yaml")
}

// certFiles issues a certificate for api.test and returns its files.
func certFiles(t *testing.T) (dir, cert, key string) {
	dir = t.TempDir()
	ca := testutil.NewTestCA(t)
	cert, key = ca.Issue(t, dir, "api", "A", "api.test")
	return dir, cert, key
}

// section is a file with a tls section (its node on line 3) and extra
// lines in it.
func section(cert, key, extra string) string {
	return "listen: 127.0.0.1:8080\ntls:\n  listen: 127.0.0.1:8443\n  certs:\n    - {cert: " + cert + ", key: " + key + "}\n" + extra
}

// TestSectionDefaults: the tls section is provisioned with its defaults,
// shares its settings and its listener, and the effective configuration
// shows it with the defaults written in.
func TestSectionDefaults(t *testing.T) {
	_, cert, key := certFiles(t)
	s, err := compile(t, section(cert, key, ""))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := edgetls.SettingsKey.Get(s.Env())
	if !ok || got.MinVersion != "1.2" || !slices.Equal(got.ALPN, []string{"h2", "http/1.1"}) || !got.OffersH2() {
		t.Fatalf("provisioned %+v", got)
	}
	if got.Listen != "127.0.0.1:8443" || !slices.Equal(got.Certs, []edgetls.Pair{{Cert: cert, Key: key}}) {
		t.Fatalf("provisioned %+v", got)
	}
	if ls, _ := pipeline.ListenersKey.Get(s.Env()); ls != (pipeline.Listeners{Plain: "127.0.0.1:8080", TLS: "127.0.0.1:8443"}) {
		t.Fatalf("listeners %+v", ls)
	}
	b, err := yaml.Marshal(s.File)
	if err != nil {
		t.Fatal(err)
	}
	var effective struct {
		TLS struct {
			Listen     string         `yaml:"listen"`
			MinVersion string         `yaml:"min_version"`
			ALPN       []string       `yaml:"alpn"`
			Certs      []edgetls.Pair `yaml:"certs"`
		} `yaml:"tls"`
	}
	if err := yaml.Unmarshal(b, &effective); err != nil {
		t.Fatal(err)
	}
	if e := effective.TLS; e.Listen != "127.0.0.1:8443" || e.MinVersion != "1.2" || !slices.Equal(e.ALPN, []string{"h2", "http/1.1"}) || len(e.Certs) != 1 {
		t.Fatalf("effective tls %+v in\n%s", e, b)
	}

	s, err = compile(t, "listen: 127.0.0.1:8080\n")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := edgetls.SettingsKey.Get(s.Env()); ok || got != nil {
		t.Fatalf("a file without tls shares %+v", got)
	}
	if ls, _ := pipeline.ListenersKey.Get(s.Env()); ls.TLS != "" {
		t.Fatalf("a file without tls has a TLS listener %q", ls.TLS)
	}
}

// TestSectionRefusals: what the section refuses is an error at the
// section's line, naming the setting and prefixed with tls.
func TestSectionRefusals(t *testing.T) {
	dir, cert, key := certFiles(t)
	junk := filepath.Join(dir, "other.key")
	if err := os.WriteFile(junk, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		yaml, want string
		line       int
	}{
		"old version":     {section(cert, key, "  min_version: \"1.1\"\n"), `tls: min_version "1.1": want 1.2 or 1.3 (TLS 1.0 and 1.1 are refused)`, 6},
		"bad listen":      {strings.Replace(section(cert, key, ""), "127.0.0.1:8443", "8443", 1), `tls: listen "8443"`, 3},
		"unknown alpn":    {section(cert, key, "  alpn: [h2, spdy/3]\n"), `tls: alpn: unknown protocol "spdy/3"`, 6},
		"alpn twice":      {section(cert, key, "  alpn: [h2, h2]\n"), "tls: alpn: h2 is listed twice", 3},
		"tiny window":     {section(cert, key, "  http2: {stream_window_bytes: 100}\n"), "at least 16384", 3},
		"many streams":    {section(cert, key, "  http2: {max_concurrent_streams: 100000}\n"), "tls: http2.max_concurrent_streams 100000: at most 10000", 3},
		"negative resets": {section(cert, key, "  http2: {max_early_resets: -1}\n"), "tls: http2.max_early_resets must not be negative", 3},
		"cert, no key":    {section(cert, "", ""), "tls: certs[0]: both cert and key are needed", 3},
		"missing file":    {section(filepath.Join(dir, "none.pem"), key, ""), "none.pem", 3},
		"key mismatch":    {section(cert, junk, ""), "other.key", 3},
		"no certs":        {"tls:\n  listen: 127.0.0.1:8443\n", "tls: certs: at least one {cert, key} is needed", 2},
		"unknown field":   {section(cert, key, "  min_versoin: \"1.3\"\n"), `unknown setting "tls.min_versoin"`, 6},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := compile(t, tc.yaml)
			var ce *config.Error
			if !errors.As(err, &ce) || ce.File != "t.yaml" || ce.Line != tc.line || !strings.Contains(ce.Msg, tc.want) {
				t.Fatalf("error %v, want %q at t.yaml:%d", err, tc.want, tc.line)
			}
		})
	}
}

// TestSectionForOtherHostsReadsTheFiles: a document checked for other
// nodes (config check, config push) has its certificate files read here
// too, as config did before the section moved: a file this host lacks is
// refused at the section's line rather than assumed present.
func TestSectionForOtherHostsReadsTheFiles(t *testing.T) {
	dir, cert, key := certFiles(t)
	notes, err := config.CheckDocument("doc", []byte(section(cert, key, "")), noEnv)
	if err != nil || len(notes) != 0 {
		t.Fatalf("a document with readable files: %v, notes %q", err, notes)
	}
	_, err = config.CheckDocument("doc", []byte(section(filepath.Join(dir, "none.pem"), key, "")), noEnv)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Line != 3 || !strings.Contains(ce.Msg, "tls: certificate files:") || !strings.Contains(ce.Msg, "none.pem") {
		t.Fatalf("a document naming a missing certificate: %v", err)
	}
}

// TestSectionIsRestartOnly: the listener is set up at start, so a reload
// that changes any of the section's settings says it waits for a
// restart; the same settings written otherwise are no change.
func TestSectionIsRestartOnly(t *testing.T) {
	_, cert, key := certFiles(t)
	load := func(src string) *config.File {
		t.Helper()
		s, err := compile(t, src)
		if err != nil {
			t.Fatal(err)
		}
		return s.File
	}
	base := load(section(cert, key, ""))
	for name, src := range map[string]string{
		"min_version": section(cert, key, "  min_version: \"1.3\"\n"),
		"http2 limit": section(cert, key, "  http2: {max_concurrent_streams: 10}\n"),
		"alpn":        section(cert, key, "  alpn: [http/1.1]\n"),
		"listen":      strings.Replace(section(cert, key, ""), "127.0.0.1:8443", "127.0.0.1:9443", 1),
		"none":        "listen: 127.0.0.1:8080\n",
	} {
		if got := config.RestartOnlyChanges(base, load(src)); !slices.Equal(got, []string{"tls"}) {
			t.Errorf("%s changed: restart-only changes %v, want [tls]", name, got)
		}
	}
	same := load("listen: 127.0.0.1:8080\n\ntls:\n  min_version: \"1.2\"\n  listen: 127.0.0.1:8443\n  certs: [{cert: " + cert + ", key: " + key + "}]\n")
	if got := config.RestartOnlyChanges(base, same); len(got) != 0 {
		t.Fatalf("the same settings written otherwise reported as %v", got)
	}
	if !slices.Contains(config.RestartOnly(), "tls") {
		t.Fatalf("restart-only settings %v without tls", config.RestartOnly())
	}
}
