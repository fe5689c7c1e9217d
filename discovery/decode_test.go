package discovery

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type decodeTarget struct {
	Endpoints []string `yaml:"endpoints"`
	TLS       struct {
		CA string `yaml:"ca"`
	} `yaml:"tls"`
}

func decodeText(t *testing.T, text string, skip ...string) (decodeTarget, error) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	var out decodeTarget
	err := Decoder(doc.Content[0], skip...)(&out)
	return out, err
}

func TestDecoderRefusesUnknownKeysWithTheirLine(t *testing.T) {
	got, err := decodeText(t, "endpoints: [a:1, b:2]\ntls: {ca: x.pem}\nfrom: etcd\n", "from")
	if err != nil || len(got.Endpoints) != 2 || got.TLS.CA != "x.pem" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	for text, want := range map[string]string{
		"endpoint: [a:1]\n":                   `line 1: unknown setting "endpoint"`,
		"endpoints: [a:1]\ntls:\n  cert: x\n": `line 3: unknown setting "cert"`,
		"endpoints: [a:1]\nfrom: etcd\n":      `line 2: unknown setting "from"`,
	} {
		if _, err := decodeText(t, text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", text, err, want)
		}
	}
}
