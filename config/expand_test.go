package config

import (
	"github.com/tollgate/tollgate/auth"
	"github.com/tollgate/tollgate/auth/jwt"
	"strings"
	"testing"
)

const jwtSecret = "jwt-secret-value-0123456789abcdef"

var secretEnv = env(map[string]string{
	"JWT_SECRET":  jwtSecret,
	"ADMIN_TOKEN": "admin-token-value-0123456789",
	"UP":          "127.0.0.1:7777",
	"RETRY":       "2",
})

const upService = "services:\n  up: {instances: [{addr: \"127.0.0.1:9\"}]}\n"

// TestDocumentExpandsOnlySecretFields: a document from Redis gets a node's
// environment in its secret fields and nowhere else. Every refusal names
// the setting and the reference as written, never the value.
func TestDocumentExpandsOnlySecretFields(t *testing.T) {
	for name, doc := range map[string]string{
		"mock body":                       upService + "routes:\n  - {name: m, match: {prefix: /m/}, mock: {responses: [{body: \"admin=${ADMIN_TOKEN} jwt=${JWT_SECRET}\"}]}}\n",
		"prefix":                          upService + "routes:\n  - {name: p, match: {prefix: \"${JWT_SECRET}\"}, service: up}\n",
		"mock header":                     upService + "routes:\n  - name: m\n    match: {prefix: /m/}\n    mock: {responses: [{headers: {X-Leak: \"${JWT_SECRET}\"}}]}\n",
		"map key":                         "services:\n  ${JWT_SECRET}: {instances: [{addr: \"127.0.0.1:9\"}]}\n",
		"address":                         "services:\n  up: {instances: [{addr: \"${UP}\"}]}\n",
		"feature":                         upService + "routes:\n  - {name: r, match: {prefix: /r/}, service: up, record: {mask: [\"header.${JWT_SECRET}\"]}}\n",
		"a provider's non-secret setting": "discovery:\n  etcd: {endpoints: [\"${JWT_SECRET}\"]}\n" + upService,
		// An alias of a secret field's value read where it is not a secret.
		"alias of a secret": "jwt:\n  keys: [{kid: k, alg: HS256, secret: &s \"${JWT_SECRET}\"}]\n" + upService +
			"routes:\n  - {name: m, match: {prefix: /m/}, mock: {responses: [{body: *s}]}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseDocument("config v3", []byte(doc), secretEnv)
			if err == nil {
				t.Fatal("a reference outside a secret field was expanded")
			}
			msg := err.Error()
			if strings.Contains(msg, jwtSecret) || strings.Contains(msg, "admin-token-value") || strings.Contains(msg, "127.0.0.1:7777") {
				t.Fatalf("the refusal carries the value: %s", msg)
			}
			if !strings.Contains(msg, "${") || !strings.Contains(msg, "only in a secret field") || !strings.HasPrefix(msg, "config v3:") {
				t.Fatalf("unclear refusal: %s", msg)
			}
		})
	}
	doc := "admin: {token: \"${ADMIN_TOKEN}\"}\njwt:\n  keys: [{kid: k, alg: HS256, secret: ${JWT_SECRET}}]\n" +
		"consumers:\n  - {app_key: a, secret: ${JWT_SECRET}}\ncluster: {password: ${ADMIN_TOKEN}}\n" +
		"discovery:\n  etcd: {endpoints: [\"127.0.0.1:2379\"], username: u, password: ${ADMIN_TOKEN}}\n" + upService
	f, err := ParseDocument("config v4", []byte(doc), secretEnv)
	if err != nil {
		t.Fatal(err)
	}
	var j jwt.Settings
	var consumers []auth.ConsumerSettings
	jn, cn := f.Features["jwt"], f.Features["consumers"]
	if err := jn.Decode(&j); err != nil {
		t.Fatal(err)
	}
	if err := cn.Decode(&consumers); err != nil {
		t.Fatal(err)
	}
	if f.Admin.Token != "admin-token-value-0123456789" || j.Keys[0].Secret != jwtSecret ||
		consumers[0].Secret != jwtSecret || f.Cluster.Password != "admin-token-value-0123456789" {
		t.Fatalf("secret fields not expanded: %+v %+v %+v", f.Admin, j.Keys, consumers[0])
	}
}

// TestNodeFileExpandsEverywhere: a node's own file keeps ${NAME} in any
// value, typed as the setting wants it, and a variable that is not set is
// an error naming it.
func TestNodeFileExpandsEverywhere(t *testing.T) {
	f, err := Parse("node.yaml", []byte("services:\n  up: {instances: [{addr: ${UP}}], retry: ${RETRY}}\n"), secretEnv)
	if err != nil {
		t.Fatal(err)
	}
	if up := writtenServices(t, f)["up"]; up.Instances[0].Addr != "127.0.0.1:7777" || up.Retry == nil || *up.Retry != 2 {
		t.Fatalf("not expanded as typed: %+v", up)
	}
	_, err = Parse("node.yaml", []byte("admin: {token: \"${NOT_SET_HERE}\"}\n"), secretEnv)
	if err == nil || err.Error() != "node.yaml:1:16: ${NOT_SET_HERE} is not set in the environment (write ${NOT_SET_HERE:-default} for a value to use when it is not)" {
		t.Fatalf("unset variable: %v", err)
	}
	// A value is a value: it cannot add settings to the file.
	inject := env(map[string]string{"ADDR": "127.0.0.1:1\"}]}\n  evil: {instances: [{addr: \"127.0.0.1:2"})
	f, err = Parse("node.yaml", []byte("services:\n  up: {instances: [{addr: \"${ADDR}\"}]}\n"), inject)
	if err != nil {
		t.Fatal(err)
	}
	if services := writtenServices(t, f); len(services) != 1 || !strings.Contains(services["up"].Instances[0].Addr, "evil") {
		t.Fatalf("the value added settings: %+v", services)
	}
}

// TestReferencesKeepTheirColumns: an error after a reference on the same
// line points where the text has it.
func TestReferencesKeepTheirColumns(t *testing.T) {
	_, err := Parse("node.yaml", []byte("consumers:\n  - {app_key: a, secret: ${JWT_SECRET}, tier: 7, bogus: 1}\n"), secretEnv)
	if err == nil || !strings.HasPrefix(err.Error(), "node.yaml:2:50: unknown setting") {
		t.Fatalf("error position: %v", err)
	}
}

// TestMessagesNeverCarryExpandedValues: a check that quotes a setting's
// value quotes the reference it came from instead.
func TestMessagesNeverCarryExpandedValues(t *testing.T) {
	lookup := env(map[string]string{"PREFIX": "no-slash-" + jwtSecret})
	_, err := compile(t, upService+"routes:\n  - {name: p, match: {prefix: \"${PREFIX}\"}, service: up}\n", lookup)
	if err == nil {
		t.Fatal("a prefix without a slash was accepted")
	}
	if strings.Contains(err.Error(), jwtSecret) {
		t.Fatalf("the message carries the value: %v", err)
	}
	if !strings.Contains(err.Error(), "${PREFIX}") {
		t.Fatalf("the message does not name the reference: %v", err)
	}
	// The services section is decoded by its owner, as the file compiles.
	_, err = compile(t, "services:\n  up: {instances: [{addr: \"127.0.0.1:9\"}], retry: ${PREFIX}}\n", lookup)
	if err == nil || strings.Contains(err.Error(), jwtSecret) {
		t.Fatalf("decode error: %v", err)
	}
}

// TestPrivateUseCharactersAreRefused: the characters references are
// parsed as cannot be written by hand, not even to stand for one.
func TestPrivateUseCharactersAreRefused(t *testing.T) {
	doc := upService + "routes:\n  - {name: m, match: {prefix: /m/}, mock: {responses: [{body: \"$\uE000JWT_SECRET\uE001\"}]}}\n"
	if _, err := ParseDocument("config v5", []byte(doc), secretEnv); err == nil || !strings.Contains(err.Error(), "config v5:4: ") {
		t.Fatalf("hand-made reference: %v", err)
	}
}

// TestSecretFieldsComeFromTheSchema: the list operators read in refusals
// is the schema's secret:"true" fields.
func TestSecretFieldsComeFromTheSchema(t *testing.T) {
	got := strings.Join(SecretFields(), " ")
	if got != "admin.token alerts.headers cluster.password consumers[].secret discovery.etcd.password jwt.keys[].secret" {
		t.Fatalf("secret fields: %s", got)
	}
}
