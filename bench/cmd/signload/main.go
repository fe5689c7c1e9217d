// Command signload drives the gateway with signed requests, each with a
// fresh nonce, at a constant rate, and then checks replay protection.
//
// Load: request i is due at t0 + i/rate (open loop, like bench/cmd/loadgen).
// A fixed pool of workers takes the next index, sleeps until it is due and
// sends it with the four signature headers: X-App-Key, X-Timestamp (the
// current unix second), X-Nonce (a random 16-hex-digit run prefix, '-', and
// the index in hex, so no two requests of any run share a nonce) and X-Sign
// (HMAC-SHA256 of the query, timestamp and nonce under -secret, computed with
// the allocation-free sign.Verifier to keep the generator cheap).
//
// Memory: with -pid, the VmRSS of that process (the gateway) is sampled once
// a second and printed with the progress; the summary gives the RSS at the
// end of the warm-up, the minimum and maximum after it and the growth.
//
// Replays: one request in 1/-replay-sample, among those the gateway accepted
// (2xx), is kept whole and, after the run, sent again with the same headers
// to -replay-url (another node of the same cluster, or the same node). Every
// one of them must be refused with 401 "replayed nonce".
//
// Output: one progress line per second, then one machine-readable line
// starting with "SIGNLOAD" (key=value pairs) and lines for people.
// Exit status: 0 when every replay was refused as a replay, 1 when a replay
// was accepted, 3 when some replay got any other answer (or none) or no
// request was kept to replay, 2 on bad flags.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/bench/internal/openloop"
	"github.com/tollgate/tollgate/bench/internal/signer"
	"github.com/tollgate/tollgate/sign"
	"github.com/valyala/fasthttp"
)

type config struct {
	rawURL, replayURL string
	appKey, secret    string
	query             string
	rate              float64
	duration, warmup  time.Duration
	conns, workers    int
	timeout, grace    time.Duration
	pid               int
	sample            float64
	replayFor         time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.rawURL, "url", "http://127.0.0.1:18080/api/x", "target URL (http only, no query: see -query)")
	flag.StringVar(&c.replayURL, "replay-url", "", "where the kept requests are replayed after the run (default -url)")
	flag.StringVar(&c.appKey, "app-key", "bench-app", "X-App-Key")
	flag.StringVar(&c.secret, "secret", "", "the app's secret (default $SIGNLOAD_SECRET)")
	flag.StringVar(&c.query, "query", "channel=app&page=2", "raw query string sent and signed with every request")
	flag.Float64Var(&c.rate, "rate", 50000, "offered load in requests per second")
	flag.DurationVar(&c.duration, "duration", 60*time.Second, "measured duration, after the warm-up")
	flag.DurationVar(&c.warmup, "warmup", 5*time.Second, "warm-up at the same rate before measuring")
	flag.IntVar(&c.conns, "conns", 64, "maximum TCP connections (per target)")
	flag.IntVar(&c.workers, "workers", 0, "worker goroutines (0 = 4 x conns)")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Second, "per-request timeout (includes waiting for a free connection)")
	flag.DurationVar(&c.grace, "grace", time.Second, "when behind schedule, keep sending this long after the schedule ends, then stop")
	flag.IntVar(&c.pid, "pid", 0, "gateway pid whose VmRSS is sampled once a second (0 = none)")
	flag.Float64Var(&c.sample, "replay-sample", 0.01, "fraction of the requests kept to be replayed (0 = no replay check)")
	flag.DurationVar(&c.replayFor, "replay-timeout", 2*time.Minute, "upper bound on the replay phase")
	flag.Parse()

	if c.secret == "" {
		c.secret = os.Getenv("SIGNLOAD_SECRET")
	}
	if c.replayURL == "" {
		c.replayURL = c.rawURL
	}
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "signload:", err)
		flag.Usage()
		os.Exit(2)
	}
	code, err := run(&c)
	if err != nil {
		log.Fatalf("signload: %v", err)
	}
	os.Exit(code)
}

func (c *config) validate() error {
	switch {
	case c.secret == "":
		return errors.New("-secret (or $SIGNLOAD_SECRET) is required")
	case c.appKey == "":
		return errors.New("-app-key is required")
	}
	if err := openloop.Check(c.rate, c.duration, c.warmup, c.conns, c.timeout); err != nil {
		return err
	}
	switch {
	case c.grace < 0:
		return errors.New("-grace must be >= 0")
	case c.sample < 0 || c.sample > 1:
		return errors.New("-replay-sample must be within [0, 1]")
	case c.replayFor <= 0:
		return errors.New("-replay-timeout must be > 0")
	case c.pid < 0:
		return errors.New("-pid must be >= 0")
	}
	if c.workers <= 0 {
		c.workers = 4 * c.conns
	}
	if total := c.rate * (c.warmup + c.duration).Seconds(); total > 1e9 {
		return fmt.Errorf("rate x (warmup + duration) is %.0f requests; refusing more than 1e9", total)
	}
	return nil
}

// target is one gateway node: its client and the request URI to send.
type target struct {
	uri string
	hc  *fasthttp.HostClient
}

func newTarget(raw, query string, c *config) (*target, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", fmt.Errorf("bad URL %q: %w", raw, err)
	}
	if u.Scheme != "http" {
		return nil, "", fmt.Errorf("only http:// URLs are supported, got %q", raw)
	}
	if u.RawQuery != "" {
		return nil, "", fmt.Errorf("URL %q has a query; pass it with -query so that it is signed", raw)
	}
	addr := openloop.HostPort(u)
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	uri := "http://" + u.Host + path
	if query != "" {
		uri += "?" + query
	}
	return &target{uri: uri, hc: openloop.NewClient("tollgate-signload", addr, c.conns, c.timeout)}, addr, nil
}

// worker runs f with what one worker sends to t with: a GET request that
// carries the app key, a response and a signer.
func (t *target) worker(c *config, prefix, appKey []byte, f func(req *fasthttp.Request, resp *fasthttp.Response, s *signer.Signer)) {
	openloop.WithGET(t.uri, func(req *fasthttp.Request, resp *fasthttp.Response) {
		req.Header.SetCanonical(hdrAppKey, appKey)
		f(req, resp, signer.New(c.secret, c.query, prefix))
	})
}

// kept is one request saved for the replay check. Its nonce is rebuilt from
// the run prefix and the index.
type kept struct {
	index    uint64
	ts       int64
	at       time.Duration // sent, since the start of the run
	sig      [sign.SignatureLen]byte
	accepted bool // the first send got a 2xx
}

// counts are the outcomes of a set of requests.
type counts struct {
	ok, s401, other, errors atomic.Int64
}

// messages tallies the "message" of 401 bodies.
type messages struct {
	mu sync.Mutex
	m  map[string]int64
}

var msgKey = []byte(`"message":"`)

func (ms *messages) add(body []byte) {
	msg := body
	if i := bytes.Index(body, msgKey); i >= 0 {
		msg = body[i+len(msgKey):]
		if j := bytes.IndexByte(msg, '"'); j >= 0 {
			msg = msg[:j]
		}
	}
	if len(msg) > 100 {
		msg = msg[:100]
	}
	ms.mu.Lock()
	ms.m[string(msg)]++
	ms.mu.Unlock()
}

func (ms *messages) get(msg string) int64 {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.m[msg]
}

// String lists the messages, most frequent first, as `"msg" xN; ...`.
func (ms *messages) String() string {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	keys := make([]string, 0, len(ms.m))
	for k := range ms.m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if ms.m[a] != ms.m[b] {
			return int(ms.m[b] - ms.m[a])
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%q x%d", k, ms.m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

const replayedMsg = "replayed nonce"

var (
	hdrAppKey = []byte(sign.HeaderAppKey)
)

// rssSample is one VmRSS reading.
type rssSample struct {
	t   time.Duration // since t0
	kib int64         // -1 when unreadable
}

func mib(kib int64) string {
	if kib < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", float64(kib)/1024)
}

type replayResult struct {
	total, refused, accepted, other, errors, unsent int64
	msgs                                            *messages
	firstErr                                        string
	took                                            time.Duration
	acceptedAt                                      []time.Duration // original send times of accepted replays
}

// perSecond renders times as "t=3s:12 t=4s:40 ...", counts per whole second.
func perSecond(ts []time.Duration) string {
	n := map[int]int{}
	var secs []int
	for _, t := range ts {
		s := int(t / time.Second)
		if n[s] == 0 {
			secs = append(secs, s)
		}
		n[s]++
	}
	slices.Sort(secs)
	parts := make([]string, len(secs))
	for i, s := range secs {
		parts[i] = fmt.Sprintf("t=%ds:%d", s, n[s])
	}
	return strings.Join(parts, " ")
}

// replay sends every kept request that was accepted again, with the same
// headers, closed loop over -conns connections, within -replay-timeout.
func replay(c *config, tgt *target, keep []kept, prefix, appKey []byte) replayResult {
	var todo []*kept
	for i := range keep {
		if keep[i].accepted {
			todo = append(todo, &keep[i])
		}
	}
	r := replayResult{total: int64(len(todo)), msgs: &messages{m: map[string]int64{}}}
	var (
		next                                 atomic.Int64
		refused, accepted, other, errs, sent atomic.Int64
		errOnce                              sync.Once
		acceptedMu                           sync.Mutex
		start                                = time.Now()
		deadline                             = start.Add(c.replayFor)
	)
	<-openloop.Go(min(c.conns, max(1, len(todo))), func() {
		tgt.worker(c, prefix, appKey, func(req *fasthttp.Request, resp *fasthttp.Response, s *signer.Signer) {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(todo)) || time.Now().After(deadline) {
					return
				}
				k := todo[i]
				_ = s.Set(req, k.index, k.ts, k.sig[:])
				sent.Add(1)
				err := tgt.hc.DoTimeout(req, resp, c.timeout)
				switch {
				case err != nil:
					errs.Add(1)
					errOnce.Do(func() { r.firstErr = err.Error() })
				case resp.StatusCode() >= 200 && resp.StatusCode() < 300:
					accepted.Add(1)
					acceptedMu.Lock()
					r.acceptedAt = append(r.acceptedAt, k.at)
					acceptedMu.Unlock()
				case resp.StatusCode() == 401 && bytes.Contains(resp.Body(), []byte(`"message":"`+replayedMsg+`"`)):
					refused.Add(1)
				default:
					other.Add(1)
					if resp.StatusCode() == 401 {
						r.msgs.add(resp.Body())
					} else {
						r.msgs.add([]byte("status " + strconv.Itoa(resp.StatusCode())))
					}
				}
			}
		})
	})
	tgt.hc.CloseIdleConnections()
	r.refused, r.accepted, r.other, r.errors = refused.Load(), accepted.Load(), other.Load(), errs.Load()
	r.unsent = r.total - sent.Load()
	r.took = time.Since(start)
	return r
}
