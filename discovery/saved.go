package discovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.uber.org/zap"
)

// savedSet is the disk copy of a watched set.
type savedSet struct {
	Target    string     `json:"target"` // the file's own name: a copy moved to another is refused
	Saved     time.Time  `json:"saved"`
	Instances []Instance `json:"instances"`
}

// maxSavedBytes bounds what is read back: a copy is a few hundred bytes
// per instance.
const maxSavedBytes = 16 << 20

// savedPath is the file the set of target (its name and the digest of
// its settings) is kept in under dir: a readable prefix and a hash of the
// whole, so two targets never share one.
func savedPath(dir, target string) string {
	if dir == "" {
		return ""
	}
	readable := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, target)
	if len(readable) > 64 {
		readable = readable[:64]
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%016x.json", readable, xxhash.Sum64String(target)))
}

// save writes set to its file through a temporary one renamed over it,
// so a crash mid-write leaves the previous copy whole.
func save(path string, set []Instance) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	b, err := json.Marshal(savedSet{Target: filepath.Base(path), Saved: time.Now().UTC(), Instances: set})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".set-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// loadSaved reads the set saved in path; a missing, unreadable or
// foreign file (one whose target is another's) is no set (logged when it is there but unusable).
func loadSaved(path string, log *zap.Logger) ([]Instance, bool) {
	if path == "" {
		return nil, false
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		log.Warn("discovery: the saved set cannot be read", zap.Error(err))
		return nil, false
	}
	defer f.Close()
	var s savedSet
	b, err := io.ReadAll(io.LimitReader(f, maxSavedBytes+1))
	if err == nil && len(b) > maxSavedBytes {
		err = errors.New("saved set larger than 16 MiB")
	}
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil || s.Target != filepath.Base(path) {
		log.Warn("discovery: the saved set is unusable; waiting for the registry", zap.String("file", path), zap.Error(err))
		return nil, false
	}
	return normalize(s.Instances), true
}
