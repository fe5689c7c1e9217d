// Command idleconns measures what idle keep-alive connections cost a server.
//
// It opens N TCP connections to -addr. Each sends one complete keep-alive GET,
// reads the whole response, and then stays open and idle. While the
// connections are held, it samples the server's resident memory
// (VmRSS from /proc/PID/status, summed over every PID given in -pid) and,
// if -goroutines-url is set, its goroutine count (an endpoint that answers
// with the number as plain text). At the end it checks how many connections
// the server kept open and prints one summary line starting with "IDLECONNS".
//
// The open-file limit is raised in-process. If N is larger than the local
// ephemeral port range allows, connections are spread over several source
// loopback addresses (127.0.0.1, 127.0.0.2, ...), which only works for a
// loopback target.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/bench/internal/procstat"
)

// ipBindAddressNoPort is IP_BIND_ADDRESS_NO_PORT from <linux/in.h>: when a
// socket is bound to a source address only, the port is chosen at connect()
// time per destination, so one source address can serve more connections.
const ipBindAddressNoPort = 24

type config struct {
	addr      string
	n         int
	hold      time.Duration
	interval  time.Duration
	path      string
	host      string
	pids      []int
	gURL      string
	token     string
	sources   int
	parallel  int
	dialTO    time.Duration
	openTO    time.Duration
	label     string
	quietHold bool
	tls       bool
}

func main() {
	var c config
	var pidList string
	flag.StringVar(&c.addr, "addr", "127.0.0.1:8080", "server address (host:port)")
	flag.IntVar(&c.n, "n", 10000, "number of idle connections to open")
	flag.DurationVar(&c.hold, "hold", 10*time.Second, "how long to hold the connections open")
	flag.DurationVar(&c.interval, "interval", time.Second, "sampling interval while holding")
	flag.StringVar(&c.path, "path", "/", "request path of the one GET sent on each connection")
	flag.StringVar(&c.host, "host", "", "Host header (default: -addr)")
	flag.StringVar(&pidList, "pid", "", "server PID(s), comma-separated, whose VmRSS is summed (optional)")
	flag.StringVar(&c.gURL, "goroutines-url", "", "URL answering the server's goroutine count as plain text (optional)")
	flag.StringVar(&c.token, "token", os.Getenv("TOLLGATE_ADMIN_TOKEN"), "bearer token for -goroutines-url (default $TOLLGATE_ADMIN_TOKEN)")
	flag.IntVar(&c.sources, "sources", 0, "number of source loopback addresses 127.0.0.1.. (0 = as many as the ephemeral port range needs)")
	flag.IntVar(&c.parallel, "parallel", 64, "concurrent dials while opening")
	flag.DurationVar(&c.dialTO, "dial-timeout", 5*time.Second, "timeout for connecting and for the first request on one connection")
	flag.DurationVar(&c.openTO, "open-timeout", 2*time.Minute, "give up opening connections after this long")
	flag.StringVar(&c.label, "label", "", "label echoed in the output")
	flag.BoolVar(&c.quietHold, "quiet", false, "do not print a line per sample while holding")
	flag.BoolVar(&c.tls, "tls", false, "speak TLS (any certificate accepted: the server is the one measured)")
	flag.Parse()

	for _, f := range strings.Split(pidList, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 {
			log.Fatalf("idleconns: bad -pid %q", f)
		}
		c.pids = append(c.pids, p)
	}
	if c.n <= 0 || c.parallel <= 0 || c.interval <= 0 || c.hold < 0 {
		log.Fatalf("idleconns: -n, -parallel and -interval must be > 0, -hold >= 0")
	}
	if c.host == "" {
		c.host = c.addr
	}
	if err := run(c); err != nil {
		log.Fatalf("idleconns: %v", err)
	}
}

func run(c config) error {
	if err := raiseNoFile(uint64(c.n) + 512); err != nil {
		return err
	}
	srcs, err := sourceAddrs(c)
	if err != nil {
		return err
	}
	label := c.label
	if label == "" {
		label = "-"
	}
	label = strings.ReplaceAll(label, " ", "_")

	rss0 := rssKB(c.pids)
	g0 := goroutines(c)
	fmt.Printf("%s: before: rss=%s goroutines=%s; opening %d connections to %s from %d source address(es)\n",
		label, fmtKB(rss0), g0, c.n, c.addr, len(srcs))

	req := []byte("GET " + c.path + " HTTP/1.1\r\nHost: " + c.host + "\r\nConnection: keep-alive\r\n\r\n")
	conns := make([]net.Conn, c.n)
	var (
		failed   atomic.Int64
		non2xx   atomic.Int64
		nextIdx  atomic.Int64
		errMu    sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), c.openTO)
	defer cancel()
	start := time.Now()
	for w := 0; w < min(c.parallel, c.n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(nextIdx.Add(1) - 1)
				if i >= c.n {
					return
				}
				if ctx.Err() != nil {
					failed.Add(1)
					continue
				}
				conn, status, err := openOne(ctx, c, srcs[i%len(srcs)], req)
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					continue
				}
				if status < 200 || status > 299 {
					non2xx.Add(1)
				}
				conns[i] = conn
			}
		}()
	}
	wg.Wait()
	openTime := time.Since(start)
	opened := c.n - int(failed.Load())
	fmt.Printf("%s: opened %d/%d in %.2fs (%d failed, %d non-2xx)\n",
		label, opened, c.n, openTime.Seconds(), failed.Load(), non2xx.Load())
	if firstErr != nil {
		fmt.Printf("%s: first error: %v\n", label, firstErr)
	}

	// Hold: sample RSS and goroutines; keep the peak.
	peakRSS, lastRSS := rssKB(c.pids), rssKB(c.pids)
	peakG, lastG := goroutines(c), goroutines(c)
	deadline := time.Now().Add(c.hold)
	for {
		now := time.Now()
		if !now.Before(deadline) {
			break
		}
		time.Sleep(min(c.interval, deadline.Sub(now)))
		lastRSS = rssKB(c.pids)
		if lastRSS > peakRSS {
			peakRSS = lastRSS
		}
		lastG = goroutines(c)
		if gi, err := strconv.Atoi(lastG); err == nil {
			if pi, err := strconv.Atoi(peakG); err != nil || gi > pi {
				peakG = lastG
			}
		}
		if !c.quietHold {
			fmt.Printf("%s: holding %d: rss=%s goroutines=%s\n", label, opened, fmtKB(lastRSS), lastG)
		}
	}

	alive := countAlive(conns)
	for _, cn := range conns {
		if cn != nil {
			_ = cn.Close()
		}
	}

	perConn := "n/a"
	if rss0 >= 0 && peakRSS >= 0 && opened > 0 {
		perConn = strconv.FormatInt((peakRSS-rss0)*1024/int64(opened), 10)
	}
	fmt.Printf("IDLECONNS label=%s addr=%s target=%d opened=%d failed=%d non2xx=%d alive_end=%d open_s=%.2f hold_s=%.0f "+
		"rss_before_kb=%s rss_peak_kb=%s rss_end_kb=%s rss_per_conn_b=%s goroutines_before=%s goroutines_peak=%s goroutines_end=%s\n",
		label, c.addr, c.n, opened, failed.Load(), non2xx.Load(), alive, openTime.Seconds(), c.hold.Seconds(),
		kbOrNA(rss0), kbOrNA(peakRSS), kbOrNA(lastRSS), perConn, g0, peakG, lastG)
	return nil
}

// openOne connects, sends one keep-alive GET and reads the full response.
func openOne(ctx context.Context, c config, src net.IP, req []byte) (net.Conn, int, error) {
	d := net.Dialer{Timeout: c.dialTO}
	if src != nil {
		d.LocalAddr = &net.TCPAddr{IP: src}
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, 0, err
	}
	_ = conn.SetDeadline(time.Now().Add(c.dialTO))
	if c.tls {
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, ServerName: strings.Split(c.host, ":")[0]}) // #nosec G402 -- measuring our own server
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, 0, err
		}
		conn = tc
	}
	if _, err := conn.Write(req); err != nil {
		_ = conn.Close()
		return nil, 0, err
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		_ = conn.Close()
		return nil, 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		_ = conn.Close()
		return nil, 0, err
	}
	if resp.Close {
		_ = conn.Close()
		return nil, 0, fmt.Errorf("server closed the connection after the first response (status %d)", resp.StatusCode)
	}
	if br.Buffered() > 0 {
		_ = conn.Close()
		return nil, 0, errors.New("unexpected bytes after the response")
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, resp.StatusCode, nil
}

// countAlive reports how many held connections the server has not closed.
// Every connection gets the same read deadline shortly ahead; a read then
// times out on a live idle connection and returns EOF or an error on a
// closed one, so the whole check takes about that one short wait.
func countAlive(conns []net.Conn) int {
	alive := 0
	buf := make([]byte, 1)
	deadline := time.Now().Add(100 * time.Millisecond)
	for _, cn := range conns {
		if cn != nil {
			_ = cn.SetReadDeadline(deadline)
		}
	}
	for _, cn := range conns {
		if cn == nil {
			continue
		}
		_, err := cn.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			alive++
		}
	}
	return alive
}

// raiseNoFile lifts RLIMIT_NOFILE to at least want (soft and, if allowed, hard).
func raiseNoFile(want uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Cur >= want {
		return nil
	}
	next := lim
	if next.Max < want {
		next.Max = want
	}
	next.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err == nil {
		return nil
	}
	// Not allowed to raise the hard limit: go as far as it allows.
	next = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		return fmt.Errorf("setrlimit: %w", err)
	}
	if next.Cur < want {
		fmt.Fprintf(os.Stderr, "idleconns: open-file limit is %d, fewer than the %d wanted; some connections will fail\n", next.Cur, want)
	}
	return nil
}

// sourceAddrs picks the local addresses to connect from. nil means "let the
// kernel choose" (a single source).
func sourceAddrs(c config) ([]net.IP, error) {
	k := c.sources
	if k <= 0 {
		lo, hi := 32768, 60999
		if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 {
				if v, err := strconv.Atoi(f[0]); err == nil {
					lo = v
				}
				if v, err := strconv.Atoi(f[1]); err == nil {
					hi = v
				}
			}
		}
		// Leave a quarter of the range for other sockets and TIME_WAIT.
		usable := max((hi-lo+1)*3/4, 1)
		k = (c.n + usable - 1) / usable
	}
	if k <= 1 {
		return []net.IP{nil}, nil
	}
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		return nil, fmt.Errorf("bad -addr: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%d connections need %d source addresses, which only works for a loopback target", c.n, k)
	}
	if k > 250 {
		return nil, fmt.Errorf("too many source addresses needed (%d)", k)
	}
	srcs := make([]net.IP, k)
	for i := range srcs {
		srcs[i] = net.IPv4(127, 0, 0, byte(i+1))
	}
	return srcs, nil
}

// rssKB sums VmRSS (kB) over pids; -1 if no pid was given or one is unreadable.
func rssKB(pids []int) int64 {
	if len(pids) == 0 {
		return -1
	}
	var sum int64
	for _, p := range pids {
		v := procstat.RSSKiB(p)
		if v < 0 {
			return -1
		}
		sum += v
	}
	return sum
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// goroutines fetches the goroutine count as text, or "n/a".
func goroutines(c config) string {
	if c.gURL == "" {
		return "n/a"
	}
	req, err := http.NewRequest(http.MethodGet, c.gURL, nil)
	if err != nil {
		return "n/a"
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "n/a"
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	if err != nil || resp.StatusCode != http.StatusOK {
		return "n/a"
	}
	s := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(s); err != nil {
		return "n/a"
	}
	return s
}

func kbOrNA(v int64) string {
	if v < 0 {
		return "n/a"
	}
	return strconv.FormatInt(v, 10)
}

func fmtKB(v int64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1fMiB", float64(v)/1024)
}
