package dubbostep

import (
	"strings"
	"testing"
)

// Configurations refused at load, each with a message naming the
// mistake.
func TestNewRefuses(t *testing.T) {
	ok := func() Config {
		return Config{Interface: "com.shop.OrderService", Method: "getOrder",
			Params: []ParamConfig{{Type: "java.lang.String", From: "query.id"}}}
	}
	if _, err := New(ptr(ok())); err != nil {
		t.Fatalf("a valid step: %v", err)
	}
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Interface = "" }, "needs interface and method"},
		{func(c *Config) { c.Method = "a.b" }, "not a Java interface and method"},
		{func(c *Config) { c.Params[0].Type = "com.shop;Bad" }, "not a Java type name"},
		{func(c *Config) { c.Params[0].From = "" }, "from names the request value"},
		{func(c *Config) { c.Params[0].From = "body.x" }, "params[0]"},
		{func(c *Config) { c.Exceptions = map[string]int{"com.shop.NotFound": 200} }, "want an error status"},
		{func(c *Config) { c.Headers = []string{"X Bad"} }, "not a header field name"},
		{func(c *Config) { c.Params = make([]ParamConfig, 256) }, "at most 255"},
	} {
		cfg := ok()
		c.edit(&cfg)
		if _, err := New(&cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}

func ptr(c Config) *Config { return &c }
