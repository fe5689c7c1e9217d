package testutil

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The programs tests run that no package manager ships at a usable
// version (Jaeger, grpcurl) are built by `make test-deps` from a module
// of their own under test/tools, at the version its go.mod pins, into
// the user's cache directory as tollgate/tools/NAME-VERSION.

// toolBinary returns the path of such a program: the one env names, else
// the cache's, for the version modDir/go.mod pins of module.
func toolBinary(env, name, modDir, module string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	version, err := toolVersion(modDir, module)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "tollgate", "tools", name+"-"+version), nil
}

// toolVersion reads the version modDir/go.mod (relative to the
// repository's root, found from the test's directory up) pins of module.
func toolVersion(modDir, module string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		f, err := os.Open(filepath.Join(dir, modDir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
			for sc.Scan() {
				fields := strings.Fields(sc.Text())
				if len(fields) >= 2 && fields[0] == module {
					return fields[1], nil
				}
			}
			return "", fmt.Errorf("%s/%s/go.mod does not pin %s", dir, modDir, module)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s/go.mod not found above the test's directory", modDir)
		}
		dir = parent
	}
}

// Grpcurl returns the grpcurl binary (TOLLGATE_GRPCURL, else the one
// `make test-deps` built), failing the test when there is none.
func Grpcurl(t testing.TB) string {
	t.Helper()
	bin, err := toolBinary("TOLLGATE_GRPCURL", "grpcurl", "test/tools/grpcurl", "github.com/fullstorydev/grpcurl")
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		t.Fatalf("grpcurl: %v: `make test-deps` builds it", err)
	}
	return bin
}
