// Package limiter enforces quotas and rate limits: the `limits` setting of
// a route (or of the whole gateway, before routing).
//
// # Rules
//
// A rule counts requests by a key — the whole route, the client address
// (IPv6 by /64), the authenticated consumer or user (Ctx.Consumer and
// Ctx.UserID, set by authentication; never a header the client chose), a
// session header or cookie, or any request value the source package reads
// (json.merchant_id, form.x, query.x) — with one of four algorithms:
// token bucket (GCRA; burst 1.5 × rate unless set), sliding window (the
// two-counter estimate), fixed window (aligned to the epoch), and leaky
// bucket (a request waits through Ctx.Sleep for its slot, up to max_delay,
// else it is refused; in cluster scope, for its slot in the cluster's
// schedule). A request without the key's value is counted under
// one shared "missing" key: it is limited with every other such request,
// never let through unlimited. After a refusal, reject_for keeps the key
// refused for that long.
//
// Every rule of a route must admit a request and the request counts
// against all of them; when one refuses, the admissions of the rules
// before it are given back, so a refused request costs no quota anywhere.
// That makes nested quotas exact: a consumer's tier quota (by consumer,
// without a rate: its tier's requests per second, or its own qps) is one
// counter shared by every route that declares it, and a route's share of
// it (share: 0.5) is a second counter that the same requests also pass.
//
// The clock is injected (pipeline.Env.Now); decisions allocate nothing.
//
// # Local limits
//
// scope: local counters live in the node. The configured rate is the
// cluster's: each node enforces rate ÷ live nodes (cluster.Nodes: the
// Redis membership, or cluster.nodes / TOLLGATE_NODES), read per request,
// so a node joining or leaving moves every share within the membership's
// refresh (a few seconds). A node's share keeps at least one token (one
// admission per window). Refusal: status.local_limit (911).
//
// # Cluster limits: token leasing
//
// scope: cluster counters live in Redis and no request waits on Redis. A
// Lua script (leaseSource, lease_redis.go) keeps each key's counter by
// Redis's own clock (TIME) and grants tokens in batches; each node spends its
// leased tokens with an atomic decrement. A lease is sized to last the
// node about leaseSpan (100 ms) at its recent demand (a key's first lease
// asks for at most 16), capped at L = max(1, ⌊rate/s × 0.1 / live nodes⌋);
// the background worker refills it when the node's pool falls to half a
// lease, in one pipelined call for every key due. A key's first request on a node, and requests while a
// refill is on its way, are admitted ahead of the lease (debt, at most one
// lease per key and node) and deducted by the next call. When Redis has
// nothing left it says how long until it will, and the node refuses
// (status.cluster_limit, 919) until then. Tokens a node leaves unused for
// 500 ms go back. Redis sees about one call per key per node per lease.
// A key that trips a cluster rule with reject_for is announced to the
// other nodes through a Redis set they watch with client-side caching
// (BlockedKey): they refuse it too within a round trip or two.
//
// Leaky bucket. A cluster leaky bucket keeps one release schedule in
// Redis (the time of its next free slot) and leases runs of its slots: a
// grant of n is the cluster's next n slots, one every per/rate, none
// further ahead than max_delay. A request takes the node's next slot and
// is held until then, so whichever node holds which slots, the cluster
// releases at the constant rate. A node's run has the cluster's spacing
// while its own requests come at its share of the rate, so a slot may be
// used up to leaseSpan after its time (later it lapses): over 10 s the
// count is as exact as the token bucket's, and over any 100 ms the
// cluster releases at most about a third more than rate × 100 ms
// (TestClusterLeakyBucketLeaksAtTheRate: 119 and 134 of 100 balanced
// and skewed at 1.5×, 101 with all load on one node). A node admits one
// request ahead of a lease, not a lease's worth: those go at once and
// would clump.
//
// Overshoot bound. Redis's counter is exact; what nodes admit beyond it
// at any moment is what they hold (at most 1.5 L each: half a lease left
// when the refill was asked, plus the refill) and what they admitted
// ahead of their leases (at most L each). So over any interval of length
// W the cluster admits at most
//
//	burst + rate × W + N × 2.5 × L     (N nodes)
//
// which with L = rate × 0.1 / N is burst + rate × W + rate/4: a quarter
// second of quota at the very worst, under 2.5 % of a 10 s window. Fixed
// window tokens are void after their window; sliding window tokens lapse
// when idle. TestClusterLimitHoldsWithinTheBound checks the bound on every
// one-second window with 3 nodes, balanced and skewed (70/20/10), at 1.5×
// and 10× the limit, for each algorithm.
//
// # Redis down or hung
//
// The worker's calls are bounded, and the request path never calls Redis:
// while the Redis client is degraded, or a lease call has been unanswered
// for 50 ms (a frozen Redis holds a call for up to a second), cluster rules
// decide on a local counter per key at rate ÷ the last known live nodes.
// That counter is charged with what the node admitted on leases, so
// falling back starts from the node's recent use, not from a full bucket.
// The switch is logged once each way and counted. When Redis answers
// again, the first lease of each key reports what the node admitted on
// that local counter alone, which Redis has not seen. Every lease also
// offers what the local counter has in use in all, leased admissions
// included; Redis charges that only to a counter it lost (a restart), once
// per node and loss, so that the counter resumes from what the nodes just
// admitted: no burst above the limit on recovery. A counter Redis kept is
// not charged it, since the leased admissions are in it already: a Redis
// slow enough to send the nodes to their local counters for 40 ms twice a
// second costs the cluster nothing (TestBriefFallbacksCostNoAdmissions;
// charged the counter's whole use each time, the limit admitted 36–64 %
// of its rate).
//
// # Memory
//
// Local counters are 32-byte slots in 64 shards of open-addressing tables
// keyed by a seeded 64-bit hash of the key (an attacker cannot aim a key at
// someone else's counter): 36.6 bytes per key at a full shard, 73 at worst
// while a shard grows. A rule keeps at most max_keys keys (default
// 1,000,000: under 40 MB); a full shard evicts by CLOCK — a key as good as
// fresh first, a key in use since the hand last passed gets a second
// chance (a hot key outlives any flood of new ones), keys under reject_for
// last. A cluster key costs a heap entry (about 280 bytes with its map
// slot and Redis key, measured over 200,000 keys), at most max_keys of
// them (default 100,000: under 30 MB); idle ones are forgotten after a
// minute.
//
// Counters survive a reload for unchanged rules (pipeline.State).
package limiter
