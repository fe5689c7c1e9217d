// Command memattack measures what a running gateway holds for clients that
// try to make it buffer: it samples the server's resident memory (VmRSS of
// -pid) while it runs one attack and prints one line starting with
// "MEMATTACK".
//
//	-attack stream  one connection sends a request to -path (a route that
//	                takes a while, e.g. a mock with a delay), then pushes
//	                -bytes of junk as fast as the socket takes them; it
//	                stops early once a write has made no progress for 1s.
//	-attack claim   -n connections each send a POST to -path claiming a
//	                -claim byte Content-Length and then -send bytes of it,
//	                and stay open for -hold. -pad adds a header field of that
//	                many bytes, to fill the gateway's header buffers.
//	-attack barelf  one request whose header section ends in a bare LF;
//	                prints how long the answer took and its status line.
//
// A config for the gateway under test:
//
//	routes:
//	  - {name: slow, match: {path: /slow}, mock: {responses: [{body: x, delay: 30s}]}}
//	  - {name: fast, match: {prefix: /}, mock: {responses: [{body: x}]}}
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/bench/internal/procstat"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "gateway address")
	pid := flag.Int("pid", 0, "gateway process id (for VmRSS)")
	attack := flag.String("attack", "stream", "stream, claim or barelf")
	path := flag.String("path", "/slow", "request target")
	total := flag.Int64("bytes", 1<<30, "stream: bytes to push")
	n := flag.Int("n", 1000, "claim: connections")
	claim := flag.Int64("claim", 8<<20, "claim: Content-Length each connection claims")
	send := flag.Int64("send", 3, "claim: body bytes each connection sends")
	pad := flag.Int("pad", 0, "claim: bytes of an extra header field")
	hold := flag.Duration("hold", 3*time.Second, "claim: how long to hold the connections")
	flag.Parse()
	if *pid == 0 && *attack != "barelf" {
		log.Fatal("-pid is required")
	}
	switch *attack {
	case "stream":
		stream(*addr, *pid, *path, *total)
	case "claim":
		claimed(*addr, *pid, *path, *n, *claim, *send, *pad, *hold)
	case "barelf":
		bareLF(*addr, *path)
	default:
		log.Fatalf("unknown attack %q", *attack)
	}
}

// sampler records the peak VmRSS of pid until stopped.
type sampler struct {
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func sample(pid int) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.peak.Store(procstat.RSSKiB(pid))
	go func() {
		defer close(s.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v := procstat.RSSKiB(pid); v > s.peak.Load() {
				s.peak.Store(v)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) end() int64 {
	close(s.stop)
	<-s.done
	return s.peak.Load()
}

func stream(addr string, pid int, path string, total int64) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	before := procstat.RSSKiB(pid)
	s := sample(pid)
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: memattack\r\n\r\n", path); err != nil {
		log.Fatal(err)
	}
	buf := []byte(strings.Repeat("x", 256<<10))
	var sent int64
	blocked := false
	start := time.Now()
	for sent < total {
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		w, err := conn.Write(buf[:min(int64(len(buf)), total-sent)])
		sent += int64(w)
		if err != nil {
			var ne net.Error
			blocked = errors.As(err, &ne) && ne.Timeout()
			break
		}
	}
	took := time.Since(start)
	time.Sleep(200 * time.Millisecond)
	peak := s.end()
	fmt.Printf("MEMATTACK attack=stream pushed_mib=%d blocked=%v push_s=%.2f rss_before_kib=%d rss_peak_kib=%d rss_growth_kib=%d\n",
		sent>>20, blocked, took.Seconds(), before, peak, peak-before)
}

func claimed(addr string, pid int, path string, n int, claim, send int64, pad int, hold time.Duration) {
	var extra string
	if pad > 0 {
		extra = "X-Pad: " + strings.Repeat("p", pad) + "\r\n"
	}
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: memattack\r\n%sContent-Length: %d\r\n\r\n%s", path, extra, claim,
		strings.Repeat("x", int(min(send, claim))))
	before := procstat.RSSKiB(pid)
	s := sample(pid)
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			log.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte(head)); err != nil {
			log.Fatalf("after %d connections: %v", len(conns), err)
		}
	}
	time.Sleep(hold)
	open := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				open++
			}
		}
	}
	peak := s.end()
	for _, c := range conns {
		c.Close()
	}
	fmt.Printf("MEMATTACK attack=claim conns=%d claim_bytes=%d sent_bytes=%d head_bytes=%d still_open=%d rss_before_kib=%d rss_peak_kib=%d per_conn_kib=%.1f\n",
		n, claim, min(send, claim), len(head), open, before, peak, float64(peak-before)/float64(n))
}

func bareLF(addr, path string) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\nHost: memattack\n\n", path); err != nil {
		log.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	fmt.Printf("MEMATTACK attack=barelf answer_s=%.3f status=%q err=%v\n", time.Since(start).Seconds(), strings.TrimSpace(line), err)
}
