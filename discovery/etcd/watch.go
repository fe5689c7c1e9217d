package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tollgate/tollgate/discovery"
)

// Back-off between failed attempts to read the registry.
const (
	backoffFirst = 500 * time.Millisecond
	backoffMax   = 10 * time.Second
)

// target is one service's watch on PREFIX/NAME/.
type target struct {
	p       *Provider
	service string
	prefix  string
}

func (t *target) String() string { return "etcd " + t.prefix }

// errCompacted ends a watch whose next revision etcd has compacted away:
// the set is listed again at once, which is not a failure.
var errCompacted = errors.New("watch revision compacted")

// Watch lists the prefix, reports the set, then follows etcd's watch
// from the listing's revision. Any failure (refused, timed out, no
// leader, the watch cancelled) goes to fail and starts over with a fresh
// listing after a back-off, so the set reported next is whole.
func (t *target) Watch(ctx context.Context, update func([]discovery.Instance), fail func(error)) {
	w := &watcher{target: t, update: update, logged: map[string]int64{}}
	wait := backoffFirst
	for ctx.Err() == nil {
		listed, err := w.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if listed {
			wait = backoffFirst
		}
		if errors.Is(err, errCompacted) {
			t.p.log.Info("etcd watch compacted; listing again", zap.String("prefix", t.prefix))
			continue
		}
		fail(fmt.Errorf("%s: %w", t, err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, backoffMax)
	}
}

// watcher is the state of one Watch call.
type watcher struct {
	*target
	update func([]discovery.Instance)
	// set maps each usable key to its instance.
	set map[string]discovery.Instance
	// reported is the last set handed to update, sorted.
	reported []discovery.Instance
	// logged maps a skipped key to the revision it was logged at, so a
	// bad value is logged and counted once, not at every listing.
	logged map[string]int64
}

// session lists the prefix and follows its changes until a failure.
// listed says whether the listing succeeded.
func (w *watcher) session(ctx context.Context) (listed bool, err error) {
	client, err := w.p.connect()
	if err != nil {
		return false, err
	}
	rev, err := w.list(ctx, client)
	if err != nil {
		return false, err
	}
	w.report(true)
	return true, w.follow(ctx, client, rev)
}

// follow applies the watch's events from rev+1 until a failure. A
// probe request each timeout finds a member that stopped answering:
// the watch stream alone would wait on it forever, the client
// reconnecting underneath without a word.
func (w *watcher) follow(ctx context.Context, client *clientv3.Client, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	events := client.Watch(wctx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	timeout := w.p.settings.Timeout.D()
	probe := time.NewTicker(timeout)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-probe.C:
			if err := w.probe(ctx, client); err != nil {
				return err
			}
		case resp, ok := <-events:
			if !ok {
				return errors.New("watch closed")
			}
			if err := resp.Err(); err != nil {
				if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision != 0 {
					return errCompacted
				}
				return fmt.Errorf("watch: %w", err)
			}
			if resp.Canceled {
				return fmt.Errorf("watch cancelled: %s", resp.CancelReason)
			}
			if len(resp.Events) == 0 {
				continue
			}
			for _, ev := range resp.Events {
				w.apply(ev.Kv, ev.Type == mvccpb.DELETE)
			}
			if len(w.set) > maxKeys {
				return fmt.Errorf("more than %d keys under %s", maxKeys, w.prefix)
			}
			w.report(false)
		}
	}
}

// probe asks for the prefix's key count, a request that needs a leader
// and answers within the timeout from a healthy cluster.
func (w *watcher) probe(ctx context.Context, client *clientv3.Client) error {
	pctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), w.p.settings.Timeout.D())
	defer cancel()
	if _, err := client.Get(pctx, w.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	return nil
}

// apply puts one key's new value, or its deletion, in the set.
func (w *watcher) apply(kv *mvccpb.KeyValue, deleted bool) {
	key := string(kv.Key)
	if deleted {
		delete(w.set, key)
		delete(w.logged, key)
		return
	}
	in, err := parseValue(kv.Value)
	switch {
	case err == nil:
		w.set[key] = in
		delete(w.logged, key)
	case errors.Is(err, errRemoved):
		// The naming layout's Delete: the key stays, the endpoint is gone.
		delete(w.set, key)
		delete(w.logged, key)
	default:
		// The key's value is now unusable: the instance it named is no
		// longer what the registry says, so it leaves the set.
		delete(w.set, key)
		w.skip(key, kv.ModRevision, err)
	}
}

// skip logs and counts a bad value once per key and revision.
func (w *watcher) skip(key string, rev int64, err error) {
	if w.logged[key] == rev {
		return
	}
	w.logged[key] = rev
	w.p.skipped.Add(1)
	w.p.log.Warn("etcd value skipped: not a usable endpoint",
		zap.String("key", truncate(key, 256)), zap.Int64("revision", rev), zap.Error(err))
}

// truncate bounds a registry-supplied string before it reaches a log.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
