package config

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// CheckDocument validates a configuration document meant for Redis the
// way a node compiles it, without connecting anywhere: errors name
// name:line:column. ${NAME} may stand in secret fields only, as nodes
// expand nothing else from a document in Redis. The document's cluster
// and config sections are ignored, as nodes ignore them (their own file
// says how to reach Redis).
// A consumer's secret_file that this host does not have is taken as
// present: nodes read it from their own disk. notes say what was assumed.
func CheckDocument(name string, text []byte, lookup func(string) (string, bool)) (notes []string, err error) {
	f, err := ParseDocument(name, text, lookup)
	if err != nil {
		return nil, err
	}
	f.Cluster, f.Config = Cluster{}, Source{}
	for _, cc := range f.Consumers {
		if cc == nil || cc.SecretFile == "" {
			continue
		}
		if _, err := os.Stat(cc.SecretFile); err != nil {
			notes = append(notes, "consumer "+cc.AppKey+": secret_file "+cc.SecretFile+" is not on this host; each node reads its own")
			cc.SecretFile, cc.Secret = "", strings.Repeat("x", 32)
		}
	}
	f.Defaults()
	c := NewCompiler()
	c.Offline = true
	snap, err := c.Compile(f, name)
	if err != nil {
		return notes, err
	}
	c.Discard(snap)
	return notes, nil
}

// PlainSecrets finds secrets written in clear in a document (consumers'
// secret, jwt.keys' secret, admin.token), which must not be stored in
// Redis, where everyone who can read the configuration would have them:
// such a secret belongs in each node's environment (${NAME}) or in a
// secret_file. It judges the values as a node would decode them (anchors,
// aliases and merges followed), with every ${NAME} standing for a marker
// nobody can write by hand: a secret must be exactly one reference.
func PlainSecrets(name string, text []byte) []*Error {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return []*Error{{File: name, Msg: "cannot check the secrets: " + err.Error()}}
	}
	tag := hex.EncodeToString(nonce[:])
	ref := regexp.MustCompile(`^tgref-` + tag + `-[A-Za-z_][A-Za-z0-9_]*-` + tag + `$`)
	f, err := Parse(name, text, func(k string) (string, bool) { return "tgref-" + tag + "-" + k + "-" + tag, true })
	if err != nil {
		return nil // CheckDocument reports it
	}
	// Positions come from the text as written, each ${NAME} made a plain
	// word first: "${" is not valid YAML everywhere (a flow mapping).
	var root yaml.Node
	_ = yaml.Unmarshal(envRef.ReplaceAll(text, []byte("ref-$1")), &root)
	doc := &yaml.Node{}
	if len(root.Content) > 0 {
		doc = root.Content[0]
	}
	var out []*Error
	check := func(where, value string, at *yaml.Node) {
		if value == "" || ref.MatchString(value) {
			return
		}
		e := &Error{File: name, Msg: where + " is written in clear; use ${NAME} (each node's environment) or secret_file"}
		if at != nil {
			e.Line, e.Col = at.Line, at.Column
		}
		out = append(out, e)
	}
	// secretAt is where item i of the sequence at path wrote its secret,
	// for the message (nil when the text does not say plainly).
	secretAt := func(i int, field string, path ...string) *yaml.Node {
		n := doc
		for _, k := range path {
			if n = mapValue(n, k); n == nil {
				return nil
			}
		}
		if n == nil || n.Kind != yaml.SequenceNode || i >= len(n.Content) {
			return nil
		}
		item := n.Content[i]
		if item.Kind == yaml.AliasNode {
			return item
		}
		return mapValue(item, field)
	}
	for i, c := range f.Consumers {
		if c != nil {
			check("consumer "+c.AppKey+".secret", c.Secret, secretAt(i, "secret", "consumers"))
		}
	}
	var keys []JWTKey
	if f.JWT != nil {
		keys = f.JWT.Keys
	}
	for i, k := range keys {
		check("jwt key "+k.KID+".secret", k.Secret, secretAt(i, "secret", "jwt", "keys"))
	}
	var tokenAt *yaml.Node
	if a := mapValue(doc, "admin"); a != nil {
		tokenAt = mapValue(a, "token")
	}
	check("admin.token", f.Admin.Token, tokenAt)
	return out
}
