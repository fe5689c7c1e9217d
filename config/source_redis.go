package config

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"go.uber.org/zap"
)

// nodeLocal are the top-level settings a node's own file keeps when it
// runs a configuration from Redis: where it listens and how it is run are
// the host's, not the cluster's. The node's cluster and config sections
// always win (they say how to reach the Redis the document came from).
var nodeLocal = []string{
	"listen", "workers", "node_id", "transport", "io_uring", "log_level", "shutdown_timeout", "drain_delay",
	"admin", "access_log", "cluster", "config",
}

// Follower gives a node with config.source redis its configuration: the
// current version in Redis, or, while Redis is unavailable, the last
// version the node ran (its local copy). It is safe for concurrent use.
type Follower struct {
	compiler *Compiler
	boot     *File // the node's own file, with env and defaults
	bootSet  map[string]bool
	lookup   func(string) (string, bool)
	cl       *cluster.Client
	log      *zap.Logger

	mu      sync.Mutex
	running StoredVersion
	loaded  StoredConfig // compiled by Load, running once Swapped says so
	from    string       // "redis" or "local copy"
	refused StoredVersion
	lastErr string
}

// FollowerStatus is what a following node reports about its configuration.
type FollowerStatus struct {
	Version uint64 `json:"version"`
	Digest  string `json:"digest"`
	// From is "redis", or "local copy" when the node started while the
	// newest version could not be read or run.
	From      string `json:"from"`
	Refused   uint64 `json:"refused_version,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// NewFollower reads the node's own file at path (its cluster, config and
// node-local settings) and connects to the cluster's Redis, which may be
// down: the client then connects in the background.
func NewFollower(c *Compiler, path string, lookup func(string) (string, bool)) (*Follower, error) {
	boot, _, err := ReadFile(path, lookup)
	if err != nil {
		return nil, err
	}
	if !boot.Config.FromRedis() {
		return nil, fmt.Errorf("%s: config.source is %q, not redis", path, boot.Config.Source)
	}
	if err := CheckNodeFile(boot, path); err != nil {
		return nil, err
	}
	cl, err := c.clusterClient(boot)
	if err != nil {
		return nil, err
	}
	return &Follower{compiler: c, boot: boot, bootSet: boot.topKeys, lookup: lookup, cl: cl, log: c.logger()}, nil
}

// Cluster is the Redis client the follower reads.
func (fw *Follower) Cluster() *cluster.Client { return fw.cl }

// Poll is how often Follow checks the current version without being told.
func (fw *Follower) Poll() time.Duration { return fw.boot.Config.Poll.D() }

// Status reports the running version and the last version refused.
func (fw *Follower) Status() FollowerStatus {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return FollowerStatus{Version: fw.running.Version, Digest: fw.running.Digest, From: fw.from,
		Refused: fw.refused.Version, LastError: fw.lastErr}
}

// Start compiles the configuration a node starts on: the current version
// in Redis when Redis answers and the version compiles, else the local
// copy (and Status says so), else an error naming both failures.
func (fw *Follower) Start() (*Snapshot, error) {
	snap, redisErr := fw.Load()
	if redisErr == nil {
		fw.Swapped() // nothing serves before the first snapshot
		return snap, nil
	}
	doc, err := fw.readCopy()
	if err != nil {
		return nil, fmt.Errorf("no configuration to start on: from redis: %w; local copy: %w", redisErr, err)
	}
	snap, err = fw.compile(doc)
	if err != nil {
		return nil, fmt.Errorf("no configuration to start on: from redis: %w; local copy: %w", redisErr, err)
	}
	fw.mu.Lock()
	fw.running, fw.from = doc.StoredVersion, "local copy"
	fw.mu.Unlock()
	fw.log.Warn("running the local copy of the last configuration this node ran: the current one in redis could not be read or run",
		zap.Uint64("version", doc.Version), zap.String("copy", fw.boot.Config.LocalCopy), zap.NamedError("redis", redisErr))
	return snap, nil
}

// Load compiles the current version in Redis. On success the caller swaps
// it in and then calls Swapped, which makes it the running version and
// the local copy: a status that named it before the swap would send a
// client that trusts it to a node still on the version before. A version
// that does not compile is remembered as refused, so Follow does not try
// it again, and reported.
func (fw *Follower) Load() (*Snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	doc, err := NewStore(fw.cl).Get(ctx, 0)
	if err != nil {
		return nil, err
	}
	if doc.Digest != digestOf(doc.Text) {
		err = fmt.Errorf("configuration version %d: its text does not match its digest", doc.Version)
	} else {
		var snap *Snapshot
		if snap, err = fw.compile(doc); err == nil {
			fw.mu.Lock()
			fw.loaded = doc
			fw.mu.Unlock()
			return snap, nil
		}
	}
	fw.mu.Lock()
	fw.refused, fw.lastErr = doc.StoredVersion, err.Error()
	fw.mu.Unlock()
	return nil, err
}

// Swapped says the version Load returned last is now the one serving:
// Status reports it and the local copy holds it.
func (fw *Follower) Swapped() {
	fw.mu.Lock()
	doc := fw.loaded
	fw.loaded = StoredConfig{}
	if doc.Version != 0 {
		fw.running, fw.from = doc.StoredVersion, "redis"
		fw.refused, fw.lastErr = StoredVersion{}, ""
	}
	fw.mu.Unlock()
	if doc.Version == 0 {
		return
	}
	if err := fw.writeCopy(doc); err != nil {
		fw.log.Warn("the local copy of the configuration was not written; a restart while redis is unavailable would not find it",
			zap.String("copy", fw.boot.Config.LocalCopy), zap.Error(err))
	}
}

// Follow calls reload whenever the current version in Redis is neither
// the running one nor one already refused: when Redis announces a change,
// when it answers again after an outage, and on every poll in between.
// It returns when stop is closed.
func (fw *Follower) Follow(stop <-chan struct{}, reload func(reason string)) {
	t := time.NewTicker(fw.Poll())
	defer t.Stop()
	changes := NewStore(fw.cl).Changes()
	for {
		select {
		case <-stop:
			return
		case <-changes:
		case <-t.C:
		}
		if !fw.cl.Healthy() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cur, err := NewStore(fw.cl).Current(ctx)
		cancel()
		if err != nil {
			continue
		}
		fw.mu.Lock()
		known := cur == fw.running || cur == fw.refused
		fw.mu.Unlock()
		if !known {
			reload("redis version " + strconv.FormatUint(cur.Version, 10))
		}
	}
}

// compile builds a snapshot from a document as a node runs it: the
// document, with the node's own settings over it, then the environment.
// The document expands ${NAME} in secret fields only: whoever can write
// to Redis must not be able to have the node serve or report its
// environment.
func (fw *Follower) compile(doc StoredConfig) (*Snapshot, error) {
	name := "config v" + strconv.FormatUint(doc.Version, 10)
	f, err := ParseDocument(name, doc.Text, fw.lookup)
	if err != nil {
		return nil, err
	}
	overlay(f, fw.boot, fw.bootSet)
	if err := ApplyEnv(f, fw.lookup); err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	f.Defaults()
	snap, err := fw.compiler.Compile(f, name)
	if err != nil {
		return nil, err
	}
	snap.Digest = sha256.Sum256(doc.Text)
	snap.ClusterVersion = doc.Version
	return snap, nil
}

// overlay sets on f the node-local settings boot's file wrote (set), and
// boot's cluster and config sections whether written or not.
func overlay(f, boot *File, set map[string]bool) {
	dst, src := reflect.ValueOf(f).Elem(), reflect.ValueOf(boot).Elem()
	t := dst.Type()
	for i := 0; i < t.NumField(); i++ {
		key := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		for _, local := range nodeLocal {
			if key == local && (set[key] || key == "cluster" || key == "config") {
				dst.Field(i).Set(src.Field(i))
			}
		}
	}
}

func digestOf(text []byte) string {
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:])
}

// copyHeader starts the local copy's first line; the document follows
// byte for byte.
const copyHeader = "# tollgate configuration version "

// writeCopy replaces the local copy with doc in one rename, so a crash
// never leaves half a file.
func (fw *Follower) writeCopy(doc StoredConfig) error {
	path := fw.boot.Config.LocalCopy
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-copy-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	head := copyHeader + strconv.FormatUint(doc.Version, 10) + " " + doc.Digest + "\n"
	_, err = tmp.WriteString(head)
	if err == nil {
		_, err = tmp.Write(doc.Text)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err // a short copy never replaces the last good one
	}
	return os.Rename(tmp.Name(), path)
}

func (fw *Follower) readCopy() (StoredConfig, error) {
	data, err := os.ReadFile(fw.boot.Config.LocalCopy)
	if err != nil {
		return StoredConfig{}, err
	}
	head, text, ok := bytes.Cut(data, []byte("\n"))
	var doc StoredConfig
	if ok && bytes.HasPrefix(head, []byte(copyHeader)) {
		v, digest, _ := strings.Cut(string(head[len(copyHeader):]), " ")
		doc.Version, _ = strconv.ParseUint(v, 10, 64)
		doc.Digest, doc.Text = digest, text
	}
	if doc.Version == 0 || doc.Digest != digestOf(doc.Text) {
		return StoredConfig{}, errors.New(fw.boot.Config.LocalCopy + ": not an intact copy of a configuration version")
	}
	return doc, nil
}
