package history

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"go.uber.org/zap"
)

// Keys share one hash tag, so that a script's keys are in one slot of a
// Redis Cluster.
const (
	keyMinute  = "{tollgate:history}:m:" // + unix minute: route → requests, summed over the nodes
	keySummed  = "{tollgate:history}:s:" // + unix minute: that minute was summed into its hour
	keyHour    = "{tollgate:history}:h:" // + unix hour: "t:"+route → requests, "p:"+route → busiest minute, "a:"+route → its unix minute
	minuteKeep = 2 * time.Hour
	hourKeep   = 8 * 24 * time.Hour
)

// addMinute adds a node's minute (ARGV 4…: route, count pairs) to the
// minute's hash, and, the first time a node writes this minute, sums
// minute M-2 into its hour: every node wrote M-2 a minute ago.
//
// KEYS: the minute's hash, M-2's hash, M-2's "summed" mark, M-2's hour.
// ARGV: the minute hash's life (s), the hour's (s), M-2 (unix minute), pairs.
var addMinute = cluster.NewScript("history: add a minute", `
for i = 4, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i+1])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
if redis.call('SET', KEYS[3], '1', 'NX', 'EX', ARGV[1]) then
  local m = redis.call('HGETALL', KEYS[2])
  for i = 1, #m, 2 do
    local route, n = m[i], tonumber(m[i+1])
    redis.call('HINCRBY', KEYS[4], 't:' .. route, n)
    local peak = tonumber(redis.call('HGET', KEYS[4], 'p:' .. route) or '0')
    if n > peak then
      redis.call('HSET', KEYS[4], 'p:' .. route, n, 'a:' .. route, ARGV[3])
    end
  end
  if #m > 0 then redis.call('EXPIRE', KEYS[4], ARGV[2]) end
end
return 1
`)

// Redis adds this node's minutes to the cluster's history.
type Redis struct {
	Client *cluster.Client
	Log    *zap.Logger
}

// AddMinute implements Sink. It runs on the Recorder's goroutine, never a
// request's; a Redis that fails or is away loses this node's minute (and
// is logged), which a limit suggestion shrugs off.
func (r *Redis) AddMinute(minute time.Time, counts map[string]uint64) {
	m := minute.Unix() / 60
	old := m - 2
	args := make([]string, 0, 3+2*len(counts))
	args = append(args, strconv.Itoa(int(minuteKeep/time.Second)), strconv.Itoa(int(hourKeep/time.Second)), strconv.FormatInt(old, 10))
	for route, n := range counts {
		args = append(args, route, strconv.FormatUint(n, 10))
	}
	call := cluster.ScriptCall{
		Keys: []string{keyMinute + strconv.FormatInt(m, 10), keyMinute + strconv.FormatInt(old, 10),
			keySummed + strconv.FormatInt(old, 10), keyHour + strconv.FormatInt(old/60, 10)},
		Args: args,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := make([]cluster.ScriptReply, 1)
	err := r.Client.RunScripts(ctx, addMinute, []cluster.ScriptCall{call}, out)
	if err == nil {
		err = out[0].Err
	}
	if err != nil && r.Log != nil {
		r.Log.Warn("traffic history: this node's minute not written to redis", zap.Time("minute", minute), zap.Error(err))
	}
}

// ReadRedis reads the cluster's hours that began at or after since, oldest
// first; hours without traffic are left out.
func ReadRedis(ctx context.Context, cl *cluster.Client, since, now time.Time) ([]Hour, error) {
	var out []Hour
	for h := since.UTC().Truncate(time.Hour); !h.After(now); h = h.Add(time.Hour) {
		fields, err := cl.HashFields(ctx, keyHour+strconv.FormatInt(h.Unix()/3600, 10))
		if err != nil {
			return nil, err
		}
		if len(fields) == 0 {
			continue
		}
		hour := Hour{Start: h, Routes: map[string]RouteHour{}}
		for k, v := range fields {
			kind, route, ok := strings.Cut(k, ":")
			n, err := strconv.ParseUint(v, 10, 64)
			if !ok || err != nil {
				continue
			}
			r := hour.Routes[route]
			switch kind {
			case "t":
				r.Requests = n
			case "p":
				r.PeakMinute = n
			case "a":
				r.PeakAt = time.Unix(int64(n)*60, 0).UTC()
			}
			hour.Routes[route] = r
		}
		out = append(out, hour)
	}
	return out, nil
}
