// Package file is the discovery provider that reads instance lists from
// files: what a deploy tool, a configuration manager or a sidecar that
// speaks to a registry of its own writes (Prometheus's file_sd and
// Traefik's file provider are the same idea). A service names its file:
//
//	discovery:
//	  file: {interval: 1s}
//	services:
//	  orders: {discover: {from: file, name: /etc/tollgate/instances/orders.yaml}}
//
// The file is a YAML (or JSON) list of instances: [{addr: "10.0.0.5:8080",
// weight: 2, meta: {version: v2}}, …]. It is read again whenever its
// size, modification time or inode changes; write it to a temporary file
// and rename it over the old one, so a reader never sees half of it (a
// file that does not parse is a failure: the last set keeps serving).
package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/discovery"
	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

func init() {
	discovery.Register(discovery.Kind{Name: "file", Settings: func() any { return new(Settings) }, New: newProvider})
}

// Settings are the provider's: `discovery.file`.
type Settings struct {
	// Interval is how often the files are looked at (default 1s).
	Interval pipeline.Duration `yaml:"interval"`
}

type provider struct{ interval time.Duration }

func newProvider(decode func(any) error, _ discovery.Env) (discovery.Provider, error) {
	s := Settings{Interval: pipeline.Duration(time.Second)}
	if err := decode(&s); err != nil {
		return nil, err
	}
	if s.Interval.D() < 10*time.Millisecond {
		return nil, fmt.Errorf("interval %s: want at least 10ms", s.Interval.D())
	}
	return &provider{interval: s.Interval.D()}, nil
}

// maxFileBytes bounds what is read of a file: a list of a hundred
// thousand instances fits.
const maxFileBytes = 16 << 20

func (p *provider) Target(name string, decode func(any) error) (discovery.Target, error) {
	var spec struct{}
	if err := decode(&spec); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(name) {
		return nil, fmt.Errorf("name %q: the file's absolute path", name)
	}
	return &target{path: filepath.Clean(name), interval: p.interval}, nil
}

type target struct {
	path     string
	interval time.Duration
}

func (t *target) String() string { return "file " + t.path }

// stamp is what says a file changed.
type stamp struct {
	size  int64
	mtime time.Time
	inode uint64
}

func (t *target) Watch(ctx context.Context, update func([]discovery.Instance), fail func(error)) {
	var last stamp
	read := false
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		st, err := t.stat()
		switch {
		case err != nil:
			fail(err)
			read = false
		case !read || st != last:
			set, err := t.read()
			if err != nil {
				fail(err)
			} else {
				update(set)
				last, read = st, true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (t *target) stat() (stamp, error) {
	fi, err := os.Stat(t.path)
	if err != nil {
		return stamp{}, err
	}
	st := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.inode = sys.Ino
	}
	return st, nil
}

func (t *target) read() ([]discovery.Instance, error) {
	f, err := os.Open(t.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", t.path, maxFileBytes)
	}
	var set []discovery.Instance
	if err := yaml.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("%s: %v", t.path, err)
	}
	for _, in := range set {
		if in.Addr == "" {
			return nil, errors.New(t.path + ": an instance without addr")
		}
	}
	return set, nil
}
