package layering

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tollgate/tollgate/"

// core are the packages features build on, each with the packages of
// this module it may import besides internal/*: itself never a feature.
var core = map[string][]string{
	"codec":    nil,
	"trace":    {"codec"},
	"pipeline": {"codec", "trace"},
	"config":   {"codec", "pipeline", "trace", "source", "route", "route/expr", "discovery"},
	// discovery is the registry seam: the watches, the last known set
	// and the providers' registry; the providers are features.
	"discovery": {"codec", "pipeline", "trace"},
}

// thirdParty are the outside packages the core may use.
var thirdParty = []string{
	"gopkg.in/yaml.v3",
	"go.uber.org/zap",
	"github.com/valyala/fasthttp",
	"github.com/cespare/xxhash/v2",
}

// stillToMove are the feature packages config imports until their
// sections are registered by their owners: the list only shrinks (the
// test fails on an entry config no longer imports, so that it is
// dropped).
var stillToMove = map[string][]string{
	"config": {
		"cluster", // the cluster section
		"edgetls", // the tls section's certificates and versions
	},
}

func TestCoreImportsNoFeature(t *testing.T) {
	for pkg, allowed := range core {
		p, err := build.ImportDir(filepath.Join("..", "..", pkg), 0) // non-test files, as built
		if err != nil {
			t.Fatal(err)
		}
		pending := stillToMove[pkg]
		for _, imp := range p.Imports {
			rel, ours := strings.CutPrefix(imp, module)
			switch {
			case !ours && !strings.Contains(strings.Split(imp, "/")[0], "."):
				// the standard library
			case !ours && slices.Contains(thirdParty, imp):
			case !ours:
				t.Errorf("%s imports %s, outside the libraries the core may use", pkg, imp)
			case strings.HasPrefix(rel, "internal/"), slices.Contains(allowed, rel):
			case slices.Contains(pending, rel):
				pending = slices.DeleteFunc(slices.Clone(pending), func(s string) bool { return s == rel })
			default:
				t.Errorf("%s imports the feature package %s: a feature's section registers with pipeline (docs/architecture.md)", pkg, rel)
			}
		}
		for _, rel := range pending {
			t.Errorf("%s no longer imports %s: drop it from stillToMove", pkg, rel)
		}
	}
}
