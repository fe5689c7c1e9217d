// Package replay sends recorded requests (package record's JSONL files) to
// another environment and compares each answer with the recorded one:
// status, chosen header fields, and body, JSON structurally. It is the
// engine of `tollgate replay`; it also turns a route's recorded answers
// into a mock responses block.
package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/tollgate/tollgate/record"
	"github.com/valyala/fasthttp"
)

// Options is what a replay does.
type Options struct {
	Files []string
	// Target is the base URL requests go to: http://host:port or https://.
	Target string
	// Host, when set, replaces the recorded Host of every request.
	Host string
	// Rate is requests per second; 0 keeps the recorded pace (each
	// request at its recorded offset from the first), and a negative rate
	// sends as fast as Concurrency allows.
	Rate float64
	// Concurrency is how many requests may be in flight; default 8.
	Concurrency int
	// Timeout bounds each request; default 10s.
	Timeout time.Duration
	// Route, when set, replays only that route's records.
	Route string

	// Signers re-sign requests that were signed (the signature was masked);
	// SignV2 signs with scheme v2. JWT issues tokens for JWT callers.
	Signers []Signer
	SignV2  bool
	JWT     *JWTIssuer

	// CompareHeaders are the answer's header fields compared (by default
	// none: dates and ids differ by nature).
	CompareHeaders []string
	// Ignore are JSON paths left out of body comparisons.
	Ignore []record.Ignore
	// Differences bounds the body differences kept per request; default 10.
	Differences int

	// Diffs, when set, receives one JSON line per request that differed or
	// failed.
	Diffs io.Writer
	// Progress, when set, is called about five times a second with the
	// figures so far, and once at the end.
	Progress func(done, total int, s *Summary)
}

// Result is what one replayed request came to.
type Result struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Route   string `json:"route"`
	Method  string `json:"method"`
	Target  string `json:"target"`
	TraceID string `json:"trace_id,omitempty"`
	// Kinds names what differed: "status", "header", "body"; or "error"
	// when no answer came.
	Kinds          []string            `json:"kinds"`
	RecordedStatus int                 `json:"recorded_status"`
	Status         int                 `json:"status,omitempty"`
	Differences    []record.Difference `json:"differences,omitempty"`
	Error          string              `json:"error,omitempty"`
	RecordedMS     float64             `json:"recorded_ms"`
	MS             float64             `json:"ms,omitempty"`
	// Credentials: "resigned", "reissued", or "withheld" (they were
	// masked and nothing could replace them).
	Credentials string `json:"credentials,omitempty"`

	recorded, took time.Duration
	skipped        string
}

// job is one record on its way.
type job struct {
	e    *record.Entry
	file string
	line int
	due  time.Duration // from the start
}

type runner struct {
	opts   Options
	tls    bool
	client *fasthttp.HostClient
}

// Run replays the files against the target until done or ctx ends.
func Run(ctx context.Context, opts Options) (*Summary, error) {
	r, err := newRunner(opts)
	if err != nil {
		return nil, err
	}
	total, err := countLines(opts.Files, opts.Route)
	if err != nil {
		return nil, err
	}
	sum := newSummary()
	jobs := make(chan job, r.opts.Concurrency)
	results := make(chan *Result, r.opts.Concurrency)
	readErr := make(chan error, 1)
	go func() { readErr <- r.read(ctx, jobs, results) }()

	var wg sync.WaitGroup
	for range r.opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var req fasthttp.Request
			var resp fasthttp.Response
			for j := range jobs {
				results <- r.send(j, &req, &resp)
			}
		}()
	}
	go func() {
		wg.Wait()
		close(results)
	}()

	var diffsErr error
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	done := 0
	report := func() {
		if opts.Progress != nil {
			opts.Progress(done, total, sum)
		}
	}
	for open := true; open; {
		select {
		case res, ok := <-results:
			if !ok {
				open = false
				break
			}
			done++
			sum.add(res)
			if opts.Diffs != nil && len(res.Kinds) > 0 && diffsErr == nil {
				diffsErr = writeDiff(opts.Diffs, res)
			}
		case <-tick.C:
			report()
		}
	}
	report()
	if err := <-readErr; err != nil {
		return sum, err
	}
	if diffsErr != nil {
		return sum, fmt.Errorf("writing differences: %w", diffsErr)
	}
	return sum, ctx.Err()
}

func newRunner(opts Options) (*runner, error) {
	u, err := url.Parse(opts.Target)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("target %q: want http://host:port or https://host:port", opts.Target)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("target %q: requests go with their recorded path; give none", opts.Target)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Differences <= 0 {
		opts.Differences = 10
	}
	addr := u.Host
	tls := u.Scheme == "https"
	if u.Port() == "" {
		addr += map[bool]string{true: ":443", false: ":80"}[tls]
	}
	return &runner{opts: opts, tls: tls, client: &fasthttp.HostClient{
		Addr: addr, IsTLS: tls, MaxConns: opts.Concurrency, ReadTimeout: opts.Timeout, WriteTimeout: opts.Timeout,
		MaxIdemponentCallAttempts: 1, DisablePathNormalizing: true, NoDefaultUserAgentHeader: true,
		MaxResponseBodySize: record.MaxLine,
	}}, nil
}

// read scans the files in order and hands each record to the workers when
// it is due; records that cannot be sent go straight to results.
func (r *runner) read(ctx context.Context, jobs chan<- job, results chan<- *Result) error {
	defer close(jobs)
	start := time.Now()
	var first time.Time
	n := 0
	for _, name := range r.opts.Files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = record.Scan(f, func(line int, e *record.Entry, err error) error {
			if err == nil && r.opts.Route != "" && e.Route != r.opts.Route {
				return nil
			}
			if err != nil || !e.RequestWhole() {
				res := &Result{File: name, Line: line, Route: e.Route, Method: e.Method, Target: e.Target}
				res.skipped = "unreadable line"
				if err == nil {
					res.skipped = "request body not recorded whole"
				}
				results <- res
				return nil
			}
			j := job{e: e, file: name, line: line}
			switch {
			case r.opts.Rate > 0:
				j.due = time.Duration(float64(n) / r.opts.Rate * float64(time.Second))
			case r.opts.Rate == 0:
				if first.IsZero() {
					first = e.Time
				}
				j.due = max(e.Time.Sub(first), 0)
			}
			n++
			if wait := time.Until(start.Add(j.due)); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			select {
			case jobs <- j:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// send replays one record and compares the answer.
func (r *runner) send(j job, req *fasthttp.Request, resp *fasthttp.Response) *Result {
	e := j.e
	res := &Result{File: j.file, Line: j.line, Route: e.Route, Method: e.Method, Target: e.Target, TraceID: e.TraceID,
		RecordedStatus: e.Status, recorded: e.Latency()}
	res.RecordedMS = ms(res.recorded)
	cred, err := r.build(req, e, time.Now())
	res.Credentials = [...]string{"", "resigned", "reissued", "withheld"}[cred]
	if err != nil {
		res.Kinds, res.Error = []string{"error"}, err.Error()
		return res
	}
	start := time.Now()
	err = r.client.DoTimeout(req, resp, r.opts.Timeout)
	res.took = time.Since(start)
	res.MS = ms(res.took)
	if err != nil {
		res.Kinds, res.Error = []string{"error"}, err.Error()
		return res
	}
	res.Status = resp.StatusCode()
	if res.Status != e.Status {
		res.Kinds = append(res.Kinds, "status")
		res.Differences = append(res.Differences, record.Difference{Kind: "status",
			Want: fmt.Sprint(e.Status), Got: fmt.Sprint(res.Status)})
	}
	headerDiffers := false
	for _, name := range r.opts.CompareHeaders {
		want, got := e.ResponseHeader(name), string(resp.Header.Peek(name))
		if masked(want) || want == got {
			continue
		}
		headerDiffers = true
		res.Differences = append(res.Differences, record.Difference{Kind: "header", Where: name,
			Want: orAbsent(want), Got: orAbsent(got)})
	}
	if headerDiffers {
		res.Kinds = append(res.Kinds, "header")
	}
	if e.ResponseWhole() {
		got, err := resp.BodyUncompressedWithLimit(record.MaxLine)
		if errors.Is(err, fasthttp.ErrContentEncodingUnsupported) {
			got, err = resp.Body(), nil
		}
		if err != nil {
			res.Kinds, res.Error = append(res.Kinds, "error"), "reading the answer: "+err.Error()
			return res
		}
		if d := record.CompareBodies(e.ResponseBody(), got, r.opts.Ignore, r.opts.Differences); len(d) > 0 {
			res.Kinds = append(res.Kinds, "body")
			res.Differences = append(res.Differences, d...)
		}
	}
	return res
}

func orAbsent(s string) string {
	if s == "" {
		return record.Absent
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// countLines counts the records to replay, for the progress bar: every
// line, or the lines that name the route (a quick look, not a parse).
func countLines(files []string, route string) (int, error) {
	var want []byte
	if route != "" {
		q, _ := json.Marshal(route)
		want = append([]byte(`"route":`), q...)
	}
	n := 0
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), record.MaxLine)
		for sc.Scan() {
			if len(sc.Bytes()) > 0 && (want == nil || bytes.Contains(sc.Bytes(), want)) {
				n++
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
	}
	return n, nil
}
