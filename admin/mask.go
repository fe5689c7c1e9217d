package admin

import (
	"net/url"
	"reflect"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/secretname"
	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// masked replaces every secret GET /admin/config shows.
const masked = "***"

// secretKeys are setting names whose values are secrets wherever they
// appear: consumer and JWT key secrets, the Redis password, the admin
// token, and the same words in features' own settings.
var secretKeys = []string{"secret", "password", "passwd", "token", "private_key", "api_key", "credentials"}

func isSecretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range secretKeys {
		if k == s || strings.HasSuffix(k, "_"+s) || strings.HasPrefix(k, s+"_") && s != "token" {
			return true
		}
	}
	return false
}

// maskedConfig returns the effective configuration (file, environment and
// defaults) as plain data with every secret replaced by "***" (an empty
// one stays empty, so an operator can tell a missing secret from a set
// one). Paths to secret files are kept: they are not secrets.
func maskedConfig(f *config.File) any {
	if f == nil {
		return nil
	}
	b, err := yaml.Marshal(f)
	if err != nil {
		return map[string]any{"error": "the configuration could not be shown"}
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return map[string]any{"error": "the configuration could not be shown"}
	}
	return maskValue(v)
}

// schemaKeys are the setting names of the configuration and of every
// registered feature. Any other key is a name an operator chose (a header
// field a mock answers or a policy sets), judged by its meaning.
var schemaKeys = sync.OnceValue(func() map[string]bool {
	keys := map[string]bool{}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if k := strings.Split(f.Tag.Get("yaml"), ",")[0]; k != "" && k != "-" {
				keys[k] = true
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(config.File{}))
	for _, f := range pipeline.Features() {
		keys[f.Key] = true
		walk(reflect.TypeOf(f.Config()))
	}
	for _, sec := range pipeline.Sections() {
		keys[sec.Key] = true
		walk(reflect.TypeOf(sec.Config()))
	}
	return keys
})

// namedSecret reports a text value under a name an operator chose that
// names a secret the way recordings judge names: X-Api-Key, accessToken.
func namedSecret(k string, v any) bool {
	_, text := v.(string)
	return text && !schemaKeys()[k] && secretname.Default.MatchString(k)
}

func maskValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			switch {
			case isSecretKey(k) && !strings.HasSuffix(strings.ToLower(k), "_file"), namedSecret(k, x):
				t[k] = maskLeaf(x)
			case strings.EqualFold(k, "redis"):
				t[k] = maskURLs(x)
			default:
				t[k] = maskValue(x)
			}
		}
		return t
	case []any:
		for i := range t {
			t[i] = maskValue(t[i])
		}
		return t
	}
	return v
}

// maskLeaf masks a secret value, keeping its shape: an empty string stays
// empty, a list or map has each of its values masked.
func maskLeaf(v any) any {
	switch t := v.(type) {
	case nil:
		return nil
	case string:
		if t == "" {
			return ""
		}
		return masked
	case []any:
		for i := range t {
			t[i] = maskLeaf(t[i])
		}
		return t
	case map[string]any:
		for k := range t {
			t[k] = maskLeaf(t[k])
		}
		return t
	}
	return masked
}

// maskURLs hides a password written inside a Redis address
// (redis://user:pass@host:port).
func maskURLs(v any) any {
	s, ok := v.(string)
	if !ok || !strings.Contains(s, "@") {
		return maskValue(v)
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), masked)
			}
			parts[i] = u.String()
		} else if at := strings.LastIndex(p, "@"); at >= 0 {
			parts[i] = masked + p[at:]
		}
	}
	return strings.Join(parts, ",")
}
