package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// The configuration documents every node runs live under one hash tag, so
// one script can write them on a Redis Cluster too:
//
//   - configCurrentKey holds "<version> <digest>" of the version nodes
//     should run. Nodes read it through client-side caching: while it is
//     unchanged a poll costs Redis nothing, and a push (which writes it)
//     makes Redis invalidate every node's cached copy at once — that
//     invalidation is the announcement.
//   - configDocsKey is a hash: field the version, value a ConfigDoc in
//     the docRecord format. Only the newest versions are kept.
//   - configSeqKey is the version counter.
const (
	configTag        = "{tollgate:config}"
	configCurrentKey = configTag + ":current"
	configDocsKey    = configTag + ":docs"
	configSeqKey     = configTag + ":seq"
)

// ErrNoConfig means no configuration was ever pushed to this Redis (or
// the version asked for is no longer kept).
var ErrNoConfig = errors.New("cluster: no such configuration version in redis")

// pushScript stores a document as the next version and makes it current,
// in one step: no node can read a current version whose document is not
// there yet. ARGV: the record, how many versions to keep, the lowest
// version number allowed (above what live nodes run, so a Redis that came
// back empty does not count from 1 again under nodes running version 40),
// the digest. It returns the new version.
var pushScript = rueidis.NewLuaScript(`
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

// ConfigVersion names one stored configuration.
type ConfigVersion struct {
	Version uint64
	Digest  string // hex SHA-256 of Text
}

// ConfigDoc is one stored configuration document.
type ConfigDoc struct {
	ConfigVersion
	Author string
	At     time.Time
	Text   []byte
}

// docRecord encodes d without its version (the hash field holds it):
// "<unix ms>\t<digest>\t<author>\n<text>".
func docRecord(d ConfigDoc) string {
	author := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, d.Author)
	return strconv.FormatInt(d.At.UnixMilli(), 10) + "\t" + d.Digest + "\t" + author + "\n" + string(d.Text)
}

func parseDocRecord(version uint64, rec string) (ConfigDoc, error) {
	head, text, ok := strings.Cut(rec, "\n")
	f := strings.SplitN(head, "\t", 3)
	if !ok || len(f) != 3 {
		return ConfigDoc{}, fmt.Errorf("cluster: configuration version %d is malformed in redis", version)
	}
	ms, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return ConfigDoc{}, fmt.Errorf("cluster: configuration version %d is malformed in redis", version)
	}
	return ConfigDoc{ConfigVersion: ConfigVersion{Version: version, Digest: f[1]}, Author: f[2],
		At: time.UnixMilli(ms), Text: []byte(text)}, nil
}

func parseCurrent(s string) (ConfigVersion, error) {
	v, digest, _ := strings.Cut(s, " ")
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return ConfigVersion{}, fmt.Errorf("cluster: malformed current configuration %q in redis", s)
	}
	return ConfigVersion{Version: n, Digest: digest}, nil
}

// PushConfig stores d (its Version is ignored) as the next version, above
// floor, and makes it the current one; keep is how many versions stay
// stored. Every node that follows the configuration is told at once. It
// returns the new version number.
func (c *Client) PushConfig(ctx context.Context, d ConfigDoc, keep int, floor uint64) (uint64, error) {
	rc, err := c.ready()
	if err != nil {
		return 0, err
	}
	if keep < 1 {
		keep = 1
	}
	args := []string{docRecord(d), strconv.Itoa(keep), strconv.FormatUint(floor, 10), d.Digest}
	n, err := pushScript.Exec(ctx, rc, []string{configSeqKey, configDocsKey, configCurrentKey}, args).AsInt64()
	if err = c.writeErr("pushing configuration", err); err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// ConfigDoc reads one stored version; version 0 means the current one.
func (c *Client) ConfigDoc(ctx context.Context, version uint64) (ConfigDoc, error) {
	if version == 0 {
		cur, err := c.CurrentConfig(ctx)
		if err != nil {
			return ConfigDoc{}, err
		}
		version = cur.Version
	}
	rc, err := c.ready()
	if err != nil {
		return ConfigDoc{}, err
	}
	rec, err := rc.Do(ctx, rc.B().Hget().Key(configDocsKey).Field(strconv.FormatUint(version, 10)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ConfigDoc{}, fmt.Errorf("%w: version %d", ErrNoConfig, version)
	}
	if err = c.writeErr("reading configuration", err); err != nil {
		return ConfigDoc{}, err
	}
	return parseDocRecord(version, rec)
}

// ConfigVersions lists the stored versions, oldest first.
func (c *Client) ConfigVersions(ctx context.Context) ([]ConfigDoc, error) {
	rc, err := c.ready()
	if err != nil {
		return nil, err
	}
	m, err := rc.Do(ctx, rc.B().Hgetall().Key(configDocsKey).Build()).AsStrMap()
	if err = c.writeErr("listing configurations", err); err != nil {
		return nil, err
	}
	out := make([]ConfigDoc, 0, len(m))
	for k, rec := range m {
		n, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			continue
		}
		if d, err := parseDocRecord(n, rec); err == nil {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b ConfigDoc) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}

// CurrentConfig reads which version nodes should run, through the
// client-side cache: unchanged, it costs Redis nothing.
func (c *Client) CurrentConfig(ctx context.Context) (ConfigVersion, error) {
	rc, err := c.ready()
	if err != nil {
		return ConfigVersion{}, err
	}
	s, err := rc.DoCache(ctx, rc.B().Get().Key(configCurrentKey).Cache(), c.o.CacheTTL).ToString()
	if rueidis.IsRedisNil(err) {
		return ConfigVersion{}, ErrNoConfig
	}
	if err = c.writeErr("reading the current configuration", err); err != nil {
		return ConfigVersion{}, err
	}
	return parseCurrent(s)
}

// configWatch wakes the node's configuration follower when Redis says the
// current version changed, or when Redis answers again after an outage.
type configWatch struct {
	mu     sync.Mutex
	notify chan struct{}
}

// ConfigChanges returns a channel that receives a value (coalesced) when
// the current configuration may have changed: Redis invalidated the
// cached current version, the cache was dropped, or Redis recovered. A
// follower must also poll (CurrentConfig through the cache is free while
// nothing changed): a missed invalidation must not leave a node behind.
func (c *Client) ConfigChanges() <-chan struct{} {
	c.cfgWatch.mu.Lock()
	defer c.cfgWatch.mu.Unlock()
	if c.cfgWatch.notify == nil {
		c.cfgWatch.notify = make(chan struct{}, 1)
	}
	return c.cfgWatch.notify
}

func (c *Client) pokeConfig() {
	c.cfgWatch.mu.Lock()
	ch := c.cfgWatch.notify
	c.cfgWatch.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// NodeStatus is what a node reports about itself with its heartbeat.
type NodeStatus struct {
	NodeLoad
	Addr          string    `json:"addr"`
	ConfigVersion uint64    `json:"config_version"`
	Started       time.Time `json:"started"`
	LastError     string    `json:"last_error,omitempty"`
}

// NodeStatuses reads every live node's status (one Redis command): the
// nodes that heartbeat (cluster.nodes: auto).
func (c *Client) NodeStatuses(ctx context.Context) ([]NodeStatus, error) {
	rc, err := c.ready()
	if err != nil {
		return nil, err
	}
	m, err := rc.Do(ctx, rc.B().Hgetall().Key(statsKey).Build()).AsStrMap()
	if err = c.writeErr("reading node statuses", err); err != nil {
		return nil, err
	}
	oldest := time.Now().Add(-3 * time.Second)
	out := make([]NodeStatus, 0, len(m))
	for node, v := range m {
		if s, ok := parseStatus(node, v); ok && !s.At.Before(oldest) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}
