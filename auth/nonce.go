package auth

import (
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Claimer is the cluster-wide nonce authority: *cluster.Client, whose
// Claim is a Redis SET NX EX. Claim must return within its own small
// budget; an error means "no answer". A claim that got no answer may
// still reach Redis later, so the same nonce may later be found claimed:
// the store never retries it, and decides it on this node's filter.
type Claimer interface {
	Claim(key string, ttl time.Duration) (fresh bool, err error)
}

// NonceStore refuses a nonce seen before within TTL, per app key.
//
// Standalone it is a rotating Bloom filter (bounded memory; a false
// positive refuses a fresh nonce with the configured small probability, and
// the client retries with a new one). In a cluster the same filter answers
// "this node saw it" at once, and Redis decides for everything else, so a
// nonce used on one node is refused on every other. When Redis gives no
// answer within its budget the node protects with its own filter, counts
// the degraded claim, and goes on.
type NonceStore struct {
	ttl     time.Duration
	bloom   *rotatingBloom
	cluster Claimer

	degraded atomic.Uint64
	replays  atomic.Uint64
}

// NonceOptions sizes a store. Zero fields take the defaults beside them.
type NonceOptions struct {
	TTL time.Duration // how long a nonce is remembered; default 600s (2 × the 300s window)
	// ExpectedRate is the nonces per second the filter is sized for;
	// default 10000. Memory is about 3 × rate × TTL/2 × 19 bits at the
	// default false positive rate (21 MiB at the defaults).
	ExpectedRate int
	// FalsePositive is the chance a fresh nonce is taken for a replay at
	// the expected rate; default 1e-4.
	FalsePositive float64
	Cluster       Claimer // nil = standalone
}

// NewNonceStore builds a store.
func NewNonceStore(o NonceOptions) *NonceStore {
	if o.TTL <= 0 {
		o.TTL = 600 * time.Second
	}
	if o.ExpectedRate <= 0 {
		o.ExpectedRate = 10000
	}
	if o.FalsePositive <= 0 || o.FalsePositive >= 1 {
		o.FalsePositive = 1e-4
	}
	perSlice := int(float64(o.ExpectedRate) * o.TTL.Seconds() / 2)
	return &NonceStore{
		ttl:     o.TTL,
		bloom:   newRotatingBloom(int64(o.TTL), perSlice, o.FalsePositive),
		cluster: o.Cluster,
	}
}

// Claim records appKey's nonce and reports whether it was fresh. It is
// atomic per node (two claims of one nonce cannot both be fresh) and, with
// a cluster, across nodes. now is the gateway's non-decreasing clock. With
// a cluster it blocks for the cluster's round trip (bounded by its budget):
// a filter claims through claimHere and, when the node found the nonce
// fresh, a clusterClaim run as a blocking call.
func (s *NonceStore) Claim(appKey, nonce []byte, now time.Time) (fresh bool) {
	return s.claimHere(appKey, nonce, now) && s.claimCluster(appKey, nonce)
}

// claimHere is the claim on this node's filter; it never blocks.
func (s *NonceStore) claimHere(appKey, nonce []byte, now time.Time) (fresh bool) {
	h1, h2 := nonceHash(appKey, nonce)
	if s.bloom.testAndAdd(h1, h2, now.UnixNano()) {
		s.replays.Add(1)
		return false
	}
	return true
}

// claimCluster is the claim across nodes (fresh when there is no
// cluster). When the cluster cannot answer, this node's filter, which
// found the nonce fresh, decides.
func (s *NonceStore) claimCluster(appKey, nonce []byte) (fresh bool) {
	if s.cluster == nil {
		return true
	}
	fresh, err := s.cluster.Claim(clusterKey(appKey, nonce), s.ttl)
	if err != nil {
		s.degraded.Add(1)
		return true // this node's filter already protects it
	}
	if !fresh {
		s.replays.Add(1)
	}
	return fresh
}

// clusterClaim is a claim's cluster half as a pipeline.BlockingCall; the
// filter keeps it in its pooled work, so the call allocates nothing.
type clusterClaim struct {
	store         *NonceStore
	appKey, nonce []byte
	fresh         bool
}

// Run implements pipeline.BlockingCall.
func (k *clusterClaim) Run() { k.fresh = k.store.claimCluster(k.appKey, k.nonce) }

// Stats reports replays refused and claims decided without the cluster.
func (s *NonceStore) Stats() (replays, degraded uint64) { return s.replays.Load(), s.degraded.Load() }

// MemoryBytes is the filter memory, fixed at build time.
func (s *NonceStore) MemoryBytes() int { return s.bloom.bytes() }

// nonceHash hashes app key and nonce with a separator that cannot occur in
// either (app keys and nonces are checked to be printable ASCII), giving
// the two hashes double hashing needs.
func nonceHash(appKey, nonce []byte) (uint64, uint64) {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(appKey)
	_, _ = d.Write(sep)
	_, _ = d.Write(nonce)
	h1 := d.Sum64()
	h2 := xxhash.Sum64(nonce) ^ 0x9e3779b97f4a7c15 ^ h1>>7
	return h1, h2 | 1
}

var sep = []byte{0}

// clusterKey is the Redis key; the hash tag keeps one app's nonces on one
// Redis Cluster slot. It allocates: the Redis path does anyway.
func clusterKey(appKey, nonce []byte) string {
	b := make([]byte, 0, len("tg:nonce:{}:")+len(appKey)+len(nonce))
	b = append(b, "tg:nonce:{"...)
	b = append(b, appKey...)
	b = append(b, "}:"...)
	b = append(b, nonce...)
	return string(b)
}
