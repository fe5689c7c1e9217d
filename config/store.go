package config

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/cluster"
)

// The configuration documents every node runs live in Redis under one
// hash tag, so one script can write them on a Redis Cluster too:
//
//   - storeCurrentKey holds "<version> <digest>" of the version nodes
//     should run. Nodes read it through client-side caching: while it is
//     unchanged a poll costs Redis nothing, and a push (which writes it)
//     makes Redis invalidate every node's cached copy at once — that
//     invalidation is the announcement.
//   - storeDocsKey is a hash: field the version, value a StoredConfig in
//     the docRecord format. Only the newest versions are kept.
//   - storeSeqKey is the version counter.
const (
	storeTag        = "{tollgate:config}"
	storeCurrentKey = storeTag + ":current"
	storeDocsKey    = storeTag + ":docs"
	storeSeqKey     = storeTag + ":seq"
)

// ErrNotStored means no configuration was ever pushed to this Redis (or
// the version asked for is no longer kept).
var ErrNotStored = errors.New("config: no such configuration version in redis")

// pushScript stores a document as the next version and makes it current,
// in one step: no node can read a current version whose document is not
// there yet. ARGV: the record, how many versions to keep, the lowest
// version number allowed (above what live nodes run, so a Redis that came
// back empty does not count from 1 again under nodes running version 40),
// the digest. It returns the new version.
var pushScript = cluster.NewScript("pushing configuration", `
local v = redis.call('INCR', KEYS[1])
local floor = tonumber(ARGV[3])
if v <= floor then
  v = floor + 1
  redis.call('SET', KEYS[1], v)
end
redis.call('HSET', KEYS[2], v, ARGV[1])
local oldest = v - tonumber(ARGV[2])
for _, k in ipairs(redis.call('HKEYS', KEYS[2])) do
  if tonumber(k) <= oldest then
    redis.call('HDEL', KEYS[2], k)
  end
end
redis.call('SET', KEYS[3], v .. ' ' .. ARGV[4])
return v
`)

// StoredVersion names one stored configuration.
type StoredVersion struct {
	Version uint64
	Digest  string // hex SHA-256 of Text
}

// StoredConfig is one stored configuration document.
type StoredConfig struct {
	StoredVersion
	Author string
	At     time.Time
	Text   []byte
}

// Store is the cluster's configuration store: the versions `tollgate
// config push` writes and nodes with config.source redis follow.
type Store struct{ c *cluster.Client }

// NewStore returns the store kept in c's Redis.
func NewStore(c *cluster.Client) Store { return Store{c: c} }

// docRecord encodes d without its version (the hash field holds it):
// "<unix ms>\t<digest>\t<author>\n<text>".
func docRecord(d StoredConfig) string {
	author := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, d.Author)
	return strconv.FormatInt(d.At.UnixMilli(), 10) + "\t" + d.Digest + "\t" + author + "\n" + string(d.Text)
}

func parseDocRecord(version uint64, rec string) (StoredConfig, error) {
	head, text, ok := strings.Cut(rec, "\n")
	f := strings.SplitN(head, "\t", 3)
	if !ok || len(f) != 3 {
		return StoredConfig{}, fmt.Errorf("config: configuration version %d is malformed in redis", version)
	}
	ms, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return StoredConfig{}, fmt.Errorf("config: configuration version %d is malformed in redis", version)
	}
	return StoredConfig{StoredVersion: StoredVersion{Version: version, Digest: f[1]}, Author: f[2],
		At: time.UnixMilli(ms), Text: []byte(text)}, nil
}

func parseCurrent(s string) (StoredVersion, error) {
	v, digest, _ := strings.Cut(s, " ")
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return StoredVersion{}, fmt.Errorf("config: malformed current configuration %q in redis", s)
	}
	return StoredVersion{Version: n, Digest: digest}, nil
}

// Push stores d (its Version is ignored) as the next version, above
// floor, and makes it the current one; keep is how many versions stay
// stored. Every node that follows the configuration is told at once. It
// returns the new version number.
func (s Store) Push(ctx context.Context, d StoredConfig, keep int, floor uint64) (uint64, error) {
	if keep < 1 {
		keep = 1
	}
	call := []cluster.ScriptCall{{
		Keys: []string{storeSeqKey, storeDocsKey, storeCurrentKey},
		Args: []string{docRecord(d), strconv.Itoa(keep), strconv.FormatUint(floor, 10), d.Digest},
	}}
	out := make([]cluster.ScriptReply, 1)
	if err := s.c.RunScripts(ctx, pushScript, call, out); err != nil {
		return 0, err
	}
	if out[0].Err != nil {
		return 0, out[0].Err
	}
	if len(out[0].Values) != 1 {
		return 0, fmt.Errorf("config: pushing configuration: unexpected reply %q", out[0].Values)
	}
	n, err := strconv.ParseUint(out[0].Values[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("config: pushing configuration: unexpected reply %q", out[0].Values)
	}
	return n, nil
}

// Get reads one stored version; version 0 means the current one.
func (s Store) Get(ctx context.Context, version uint64) (StoredConfig, error) {
	if version == 0 {
		cur, err := s.Current(ctx)
		if err != nil {
			return StoredConfig{}, err
		}
		version = cur.Version
	}
	rec, err := s.c.HashField(ctx, storeDocsKey, strconv.FormatUint(version, 10))
	if errors.Is(err, cluster.ErrNoKey) {
		return StoredConfig{}, fmt.Errorf("%w: version %d", ErrNotStored, version)
	}
	if err != nil {
		return StoredConfig{}, err
	}
	return parseDocRecord(version, rec)
}

// Versions lists the stored versions, oldest first.
func (s Store) Versions(ctx context.Context) ([]StoredConfig, error) {
	m, err := s.c.HashFields(ctx, storeDocsKey)
	if err != nil {
		return nil, err
	}
	out := make([]StoredConfig, 0, len(m))
	for k, rec := range m {
		n, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			continue
		}
		if d, err := parseDocRecord(n, rec); err == nil {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b StoredConfig) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}

// Current reads which version nodes should run, through the client-side
// cache: unchanged, it costs Redis nothing.
func (s Store) Current(ctx context.Context) (StoredVersion, error) {
	v, err := s.c.CachedGet(ctx, storeCurrentKey)
	if errors.Is(err, cluster.ErrNoKey) {
		return StoredVersion{}, ErrNotStored
	}
	if err != nil {
		return StoredVersion{}, err
	}
	return parseCurrent(v)
}

// Changes returns a channel that receives a value (coalesced) when the
// current version may have changed: Redis invalidated the cached current
// version, the cache was dropped, or Redis recovered. A follower must also
// poll (Current is free while nothing changed): a missed invalidation must
// not leave a node behind.
func (s Store) Changes() <-chan struct{} { return s.c.KeyChanges(storeCurrentKey) }
