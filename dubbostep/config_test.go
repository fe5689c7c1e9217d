package dubbostep_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
	_ "github.com/tollgate/tollgate/features"
)

const dubboRoutes = `
services:
  java: {protocol: dubbo, instances: [{addr: "127.0.0.1:1"}]}
  web: {instances: [{addr: "127.0.0.1:2"}]}
routes:
  - name: order
    match: {prefix: /orders/}
    dubbo: {interface: com.shop.OrderService, method: getOrder, params: [{type: java.lang.String, from: query.id}]}
    service: java
`

// TestDubboServiceReachedOnlyThroughTheStep: a Dubbo service is reached
// through a route's dubbo step and nothing else: HTTP relayed to it by a
// route without the step, a split, a fallback or the default service is
// refused at load, naming the way that works.
func TestDubboServiceReachedOnlyThroughTheStep(t *testing.T) {
	compile := func(text string) error {
		f, err := config.Parse("t.yaml", []byte(text), nil)
		if err == nil {
			f.Defaults()
			_, err = config.NewCompiler().Compile(f, "t.yaml")
		}
		return err
	}
	if err := compile(dubboRoutes); err != nil {
		t.Fatalf("the route with its step: %v", err)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"no step": {dubboRoutes + `
  - {name: raw, match: {prefix: /raw/}, service: java}
`, `service "java" speaks Dubbo; the route calls it through a dubbo step`},
		"split": {dubboRoutes + `
  - name: canary
    match: {prefix: /canary/}
    split: [{service: web, percent: 90}, {service: java}]
`, `split: service "java" speaks Dubbo`},
		"fallback":        {dubboRoutes + "fallbacks: [{service: java}]\n", `fallbacks: service "java" speaks Dubbo`},
		"default service": {dubboRoutes + "default_service: java\n", `default_service "java" speaks Dubbo`},
	} {
		t.Run(name, func(t *testing.T) {
			if err := compile(tc.yaml); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
