package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/discovery"
)

// Bounds on a listing: a service with more keys than maxKeys is a
// registry gone wrong, not one to balance over, and a page is small
// enough that pageKeys values of the accepted size fit one answer.
const (
	maxKeys  = 10000
	pageKeys = 200
)

// list reads every key under the prefix, in pages all at the revision of
// the first, into a fresh set, and returns that revision.
func (w *watcher) list(ctx context.Context, client *clientv3.Client) (int64, error) {
	w.set = map[string]discovery.Instance{}
	present := map[string]bool{}
	end := clientv3.GetPrefixRangeEnd(w.prefix)
	from := w.prefix
	limit := int64(pageKeys)
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(limit)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		gctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), w.p.settings.Timeout.D())
		resp, err := client.Get(gctx, from, opts...)
		cancel()
		switch {
		case err == nil:
		case status.Code(err) == codes.ResourceExhausted && limit > 1:
			// Values over the accepted size made the page too big for
			// one answer: fetch fewer at a time; the big ones are
			// skipped as they come.
			limit = max(limit/8, 1)
			continue
		case errors.Is(err, rpctypes.ErrCompacted):
			return 0, errCompacted
		default:
			return 0, fmt.Errorf("listing: %w", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			present[string(kv.Key)] = true
			w.apply(kv, false)
		}
		if len(present) > maxKeys {
			return 0, fmt.Errorf("more than %d keys under %s", maxKeys, w.prefix)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	for key := range w.logged {
		if !present[key] {
			delete(w.logged, key)
		}
	}
	return rev, nil
}

// report hands the set to update, sorted by address, when it differs
// from the last one reported or when always is set (after a listing, so
// that a set is reported once the registry answers again).
func (w *watcher) report(always bool) {
	keys := make([]string, 0, len(w.set))
	for key := range w.set {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	// Two keys naming one address (an instance registered again under
	// another key) are one instance, not twice its share: the first key
	// in order speaks for it.
	out := make([]discovery.Instance, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	for _, key := range keys {
		if in := w.set[key]; !seen[in.Addr] {
			seen[in.Addr] = true
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b discovery.Instance) int { return strings.Compare(a.Addr, b.Addr) })
	if !always && slices.EqualFunc(out, w.reported, sameInstance) {
		return
	}
	w.reported = out
	w.update(slices.Clone(out))
}

func sameInstance(a, b discovery.Instance) bool {
	if a.Addr != b.Addr || a.Weight != b.Weight || len(a.Meta) != len(b.Meta) {
		return false
	}
	for k, v := range a.Meta {
		if bv, ok := b.Meta[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
