package limiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/cluster"
)

// Token leases: the cluster-wide counter of a limit lives in Redis, and
// nodes take tokens from it in batches (leases) from a background worker,
// never per request. leaseScript is the whole protocol on the Redis side:
// it refills (or rolls the windows of) one counter by Redis's own clock
// (TIME, so the nodes' clocks do not matter), deducts what the node spent
// without a lease (or takes back tokens it returns), and grants up to what
// the node asks for. One key per call: the key's hash tag decides its slot
// on a Redis Cluster.
//
// Storage: one string, so a call is TIME, GET and SET inside the script.
// Token bucket: "tokens last_refill_µs" (tokens may be negative: debt).
// Windows: "window count previous". Leaky bucket: "tat_µs 0", tat the time of
// the cluster's next free slot. The key expires once it would be as good
// as fresh (ttl_ms).
//
// A leaky bucket's lease is a run of slots rather than tokens: the
// cluster releases one request every per/limit, and a grant of n is the
// next n slots of that one schedule, the first level µs from Redis's now,
// none further ahead than the bucket's capacity (burst slots). The node
// releases its requests at those times, so the cluster as a whole leaks
// at the constant rate whichever node holds which slots.
//
// A counter Redis lost (a restart without persistence, a failover to a
// replica behind) must not start again from full: that would admit a
// burst on top of what the nodes admitted just before. So each call also
// offers in_use, what the node's own count says it has admitted lately,
// leased admissions included. A call that finds no counter while its node
// has some in use marks the counter lost, in a second key (KEYS[2], same
// hash tag: "<lost_at_µs> <node> <node> ...", the nodes that have charged)
// kept as long as the counter would be; one MGET reads both, so a call
// runs no more commands than before. Each node charges its in_use, in place of spent when
// larger, once per mark: on its first call that finds its name missing
// from the mark, whether or not the node saw that call's answer (a call
// that timed out may still have been applied). A counter Redis kept is
// never charged in_use: its leased admissions are in it already. Nor is
// a call's in_use charged when Redis runs the call after in_use_until
// (µs, the node's clock): a server frozen with calls in its socket runs
// them late, when what their nodes had in use then is long refilled.
//
// KEYS: the counter, its loss mark. A node of an earlier release sends
// one key and seven arguments, and the mark is left alone.
// ARGV: alg (0 token bucket, 1 fixed window, 2 sliding window, 3 leaky
// bucket), limit (tokens per period), per (µs), burst, want, spent, ttl_ms,
// in_use, node, in_use_until.
// Reply: {granted, level (string), wait_µs, window_left_µs}: level is the
// tokens left after the grant (token bucket), the room left in the window,
// or the first granted slot's offset (leaky bucket); wait is, when fewer
// than wanted were granted, how long until the rest would be there.
const leaseSource = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local alg = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local per = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local spent = tonumber(ARGV[6])
local grant, level, wait, left = 0, 0, 0, 0
local function num(x) return string.format('%.17g', x) end
local v
if KEYS[2] then
  local got = redis.call('MGET', KEYS[1], KEYS[2])
  v = got[1]
  -- MGET reads a key of another type as missing; GET makes it the
  -- request's error, as without the mark.
  if not v then v = redis.call('GET', KEYS[1]) end
  local mark = got[2]
  local inuse = tonumber(ARGV[8]) or 0
  if now > (tonumber(ARGV[10]) or 0) then inuse = 0 end
  local me = ' ' .. ARGV[9] .. ' '
  local charge = false
  if not v and inuse > 0 then
    redis.call('SET', KEYS[2], num(now) .. me, 'PX', ARGV[7])
    charge = true
  elseif mark and not string.find(mark, me, 1, true) then
    redis.call('SET', KEYS[2], mark .. ARGV[9] .. ' ', 'KEEPTTL')
    charge = true
  end
  if charge and inuse > spent then spent = inuse end
else
  v = redis.call('GET', KEYS[1])
end
local a, b, c
if v then
  a, b, c = string.match(v, '^(%S+) (%S+) ?(%S*)$')
  a, b, c = tonumber(a), tonumber(b), tonumber(c)
end
local state
if alg == 0 then
  local tk, ts = a, b
  if tk == nil or ts == nil then tk, ts = burst, now end
  if now > ts then
    tk = tk + (now - ts) * limit / per
    ts = now
  end
  if tk > burst then tk = burst end
  tk = tk - spent
  if tk > burst then tk = burst end
  if tk < -burst then tk = -burst end
  if want > 0 and tk >= 1 then
    grant = math.min(want, math.floor(tk))
    tk = tk - grant
  end
  if grant < want then wait = math.ceil((want - grant - tk) * per / limit) end
  level = tk
  state = num(tk) .. ' ' .. num(ts)
elseif alg == 3 then
  local gap = per / limit
  local tat = a
  if tat == nil or tat < now then tat = now end
  tat = tat + spent * gap
  if tat < now then tat = now end
  local horizon = now + (burst - 1) * gap
  level = tat - now
  if want > 0 and tat <= horizon then
    grant = math.min(want, math.floor((horizon - tat) / gap) + 1)
    tat = tat + grant * gap
  end
  if grant < want then wait = math.max(0, math.ceil(tat - horizon)) end
  state = num(tat) .. ' 0'
else
  local w = math.floor(now / per)
  local vw, cnt, p = a, b or 0, c or 0
  if vw == nil then
    cnt, p = 0, 0
  elseif vw == w - 1 then
    p, cnt = cnt, 0
  elseif vw ~= w then
    cnt, p = 0, 0
  end
  if alg == 1 then p = 0 end
  left = (w + 1) * per - now
  local weight = 0
  if alg == 2 then weight = left / per end
  cnt = cnt + spent
  if cnt < 0 then cnt = 0 end
  local room = limit - (p * weight + cnt)
  if want > 0 and room >= 1 then
    grant = math.min(want, math.floor(room))
    cnt = cnt + grant
  end
  level = limit - (p * weight + cnt)
  if grant < want then
    wait = left
    if alg == 2 and p > 0 then
      local w2 = math.ceil(((want - grant) - level) * per / p)
      if w2 < wait then wait = w2 end
    end
  end
  state = num(w) .. ' ' .. num(cnt) .. ' ' .. num(p)
end
redis.call('SET', KEYS[1], state, 'PX', ARGV[7])
return {grant, num(level), wait, left}
`

var leaseScript = cluster.NewScript("leasing tokens", leaseSource)

// Lease algorithms, as the script knows them.
const (
	LeaseTokenBucket   = 0
	LeaseFixedWindow   = 1
	LeaseSlidingWindow = 2
	LeaseLeakyBucket   = 3
)

// LeaseRequest asks Redis for tokens of one counter.
type LeaseRequest struct {
	// Key is the counter's Redis key; it carries a hash tag ("{...}").
	Key string
	// Alg is LeaseTokenBucket, LeaseFixedWindow, LeaseSlidingWindow or
	// LeaseLeakyBucket.
	Alg int
	// Limit is the tokens per Per the whole cluster may use; Burst the
	// bucket's capacity (leaky bucket: in slots, the first one now).
	Limit float64
	Per   time.Duration
	Burst float64
	// Want is how many tokens the node asks for (0: only report Spent).
	Want int64
	// Spent is what the node admitted without a lease, to be deducted
	// first; negative, tokens it gives back unused.
	Spent int64
	// InUse is what the node's own count of the limit says it admitted
	// lately, leased admissions included. It replaces Spent, when larger,
	// once per loss of the counter (see leaseSource); charged to a
	// counter Redis kept, the leased ones would be counted twice.
	InUse int64
	// TTL is how long the counter is kept without calls: at least the
	// time it takes to be fresh again.
	TTL time.Duration
}

// LeaseResult is Redis's answer to one LeaseRequest.
type LeaseResult struct {
	Granted int64
	// Level is what the counter holds after the grant: tokens (negative
	// when nodes spent ahead of their leases) or room left in the window;
	// for a leaky bucket, how far (µs) after Redis's now the first
	// granted slot is.
	Level float64
	// Wait is, when fewer tokens than wanted were granted, how long until
	// the rest would be there.
	Wait time.Duration
	// WindowLeft is the time left in the current window (window
	// algorithms): leased window tokens are void after it.
	WindowLeft time.Duration
	// Err is a Redis error reply for this request (a script error), nil
	// when it was answered.
	Err error
}

// redisLeaser is the Leaser of a node in a cluster: the lease protocol
// run on the node's Redis client. The client's other methods (health,
// the shared set of blocked keys) are the ones the manager uses too.
type redisLeaser struct{ *cluster.Client }

// Lease runs reqs in one pipelined round trip (see cluster.RunScripts)
// and fills out (len(reqs)). It is for the background worker, never the
// request path: it returns cluster.ErrDegraded at once while degraded,
// and otherwise may take up to timeout (or, against a silent server,
// about a second more). A connection failure puts the client in degraded
// mode; a script error is kept in its LeaseResult.
func (l redisLeaser) Lease(timeout time.Duration, reqs []LeaseRequest, out []LeaseResult) error {
	if len(out) < len(reqs) {
		return errors.New("limiter: Lease: out shorter than reqs")
	}
	if len(reqs) == 0 {
		return nil
	}
	// A second beyond the call's own limit: the nodes' clocks and Redis's
	// need only agree that closely.
	inUseUntil := strconv.FormatInt(time.Now().Add(timeout+time.Second).UnixMicro(), 10)
	calls := make([]cluster.ScriptCall, len(reqs))
	for i := range reqs {
		calls[i] = cluster.ScriptCall{
			Keys: []string{reqs[i].Key, lossMarkKey(reqs[i].Key)},
			Args: leaseArgs(&reqs[i], l.NodeID(), inUseUntil),
		}
	}
	replies := make([]cluster.ScriptReply, len(reqs))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := l.RunScripts(ctx, leaseScript, calls, replies); err != nil {
		return err
	}
	for i := range replies {
		out[i] = leaseResult(&replies[i])
	}
	return nil
}

// lossMarkKey is the key of a counter's loss mark: the counter's key and
// a suffix, so that its hash tag puts both in one slot.
func lossMarkKey(key string) string { return key + ":lost" }

func leaseArgs(r *LeaseRequest, node, inUseUntil string) []string {
	ttl := max(int64(r.TTL/time.Millisecond), 1000)
	return []string{
		strconv.Itoa(r.Alg),
		strconv.FormatFloat(r.Limit, 'g', -1, 64),
		strconv.FormatInt(max(1, int64(r.Per/time.Microsecond)), 10),
		strconv.FormatFloat(max(r.Burst, 1), 'g', -1, 64),
		strconv.FormatInt(max(0, r.Want), 10),
		strconv.FormatInt(r.Spent, 10),
		strconv.FormatInt(ttl, 10),
		strconv.FormatInt(max(0, r.InUse), 10),
		node,
		inUseUntil,
	}
}

// leaseResult reads one reply: {granted, level, wait_µs, window_left_µs}.
func leaseResult(r *cluster.ScriptReply) LeaseResult {
	if r.Err != nil {
		return LeaseResult{Err: r.Err}
	}
	if len(r.Values) != 4 {
		return LeaseResult{Err: fmt.Errorf("limiter: lease: unexpected reply %q", r.Values)}
	}
	var out LeaseResult
	out.Granted, _ = strconv.ParseInt(r.Values[0], 10, 64)
	out.Level, _ = strconv.ParseFloat(r.Values[1], 64)
	w, _ := strconv.ParseInt(r.Values[2], 10, 64)
	left, _ := strconv.ParseInt(r.Values[3], 10, 64)
	out.Wait = time.Duration(w) * time.Microsecond
	out.WindowLeft = time.Duration(left) * time.Microsecond
	return out
}
