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
	"config":   {"codec", "pipeline", "trace", "source", "route", "route/expr", "cluster"},
	// discovery is the registry seam: the watches, the last known set
	// and the providers' registry; the providers are features.
	"discovery": {"codec", "pipeline", "trace"},
	// cluster is the Redis client and its primitives (budgeted scripts,
	// watched sets, membership, health), no feature's protocol: config
	// reads its own document from Redis through it.
	"cluster": {"pipeline"},
}

// thirdParty are the outside packages the core may use.
var thirdParty = []string{
	"gopkg.in/yaml.v3",
	"go.uber.org/zap",
	"github.com/valyala/fasthttp",
	"github.com/cespare/xxhash/v2",
	"github.com/redis/rueidis", // cluster's client
}

func TestCoreImportsNoFeature(t *testing.T) {
	for pkg, allowed := range core {
		p, err := build.ImportDir(filepath.Join("..", "..", pkg), 0) // non-test files, as built
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range p.Imports {
			rel, ours := strings.CutPrefix(imp, module)
			switch {
			case !ours && !strings.Contains(strings.Split(imp, "/")[0], "."):
				// the standard library
			case !ours && slices.Contains(thirdParty, imp):
			case !ours:
				t.Errorf("%s imports %s, outside the libraries the core may use", pkg, imp)
			case strings.HasPrefix(rel, "internal/"), slices.Contains(allowed, rel):
			default:
				t.Errorf("%s imports the feature package %s: a feature's section registers with pipeline (docs/architecture.md)", pkg, rel)
			}
		}
	}
}
