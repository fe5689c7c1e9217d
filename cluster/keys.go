package cluster

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/rueidis"
)

// ErrNoKey means the key (or the hash field) read does not exist.
var ErrNoKey = errors.New("cluster: no such key in redis")

// CachedGet reads the string at key through the client-side cache: while
// the key is unchanged a read costs Redis nothing, and a write to it makes
// Redis invalidate every node's cached copy (see KeyChanges). Not for the
// request path: it may take until ctx is done.
func (c *Client) CachedGet(ctx context.Context, key string) (string, error) {
	rc, err := c.ready()
	if err != nil {
		return "", err
	}
	s, err := rc.DoCache(ctx, rc.B().Get().Key(key).Cache(), c.o.CacheTTL).ToString()
	if rueidis.IsRedisNil(err) {
		return "", ErrNoKey
	}
	if err = c.writeErr("reading "+key, err); err != nil {
		return "", err
	}
	return s, nil
}

// HashField reads one field of the hash at key (HGET). Not for the
// request path.
func (c *Client) HashField(ctx context.Context, key, field string) (string, error) {
	rc, err := c.ready()
	if err != nil {
		return "", err
	}
	s, err := rc.Do(ctx, rc.B().Hget().Key(key).Field(field).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", ErrNoKey
	}
	if err = c.writeErr("reading "+key, err); err != nil {
		return "", err
	}
	return s, nil
}

// HashFields reads every field of the hash at key (HGETALL); a missing
// key is an empty map. Not for the request path.
func (c *Client) HashFields(ctx context.Context, key string) (map[string]string, error) {
	rc, err := c.ready()
	if err != nil {
		return nil, err
	}
	m, err := rc.Do(ctx, rc.B().Hgetall().Key(key).Build()).AsStrMap()
	if err = c.writeErr("reading "+key, err); err != nil {
		return nil, err
	}
	return m, nil
}

// keyWatch holds the channels of KeyChanges, by key.
type keyWatch struct {
	mu     sync.Mutex
	notify map[string]chan struct{}
}

// KeyChanges returns a channel that receives a value (coalesced) when the
// string at key may have changed: Redis invalidated the copy CachedGet
// keeps, the cache was dropped, or Redis recovered. Every call for one key
// returns the same channel. A watcher must also poll (CachedGet is free
// while nothing changed): a missed invalidation must not leave a node
// behind.
func (c *Client) KeyChanges(key string) <-chan struct{} {
	c.keys.mu.Lock()
	defer c.keys.mu.Unlock()
	ch := c.keys.notify[key]
	if ch == nil {
		ch = make(chan struct{}, 1)
		if c.keys.notify == nil {
			c.keys.notify = map[string]chan struct{}{}
		}
		c.keys.notify[key] = ch
	}
	return ch
}

// pokeKey wakes the watcher of key, if any.
func (c *Client) pokeKey(key string) {
	c.keys.mu.Lock()
	ch := c.keys.notify[key]
	c.keys.mu.Unlock()
	poke(ch)
}

// pokeKeys wakes every watcher: the cache was dropped, or Redis is back.
func (c *Client) pokeKeys() {
	c.keys.mu.Lock()
	defer c.keys.mu.Unlock()
	for _, ch := range c.keys.notify {
		poke(ch)
	}
}

func poke(ch chan struct{}) {
	if ch == nil {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}
