package server_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
)

// bigBlock is what the big-answer upstream sends, over and over: one
// block shared by every answer, so the upstream holds nothing per answer
// and the memory a test sees growing is the gateway's.
var bigBlock = func() []byte {
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}()

// bigDigest is the SHA-256 of n bytes of the big-answer upstream's body.
func bigDigest(n int) [32]byte {
	h := sha256.New()
	for n > 0 {
		k := min(n, len(bigBlock))
		h.Write(bigBlock[:k])
		n -= k
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

// bigUpstream answers GET /big?n=N&frame=length|chunked|close with N bytes
// of bigBlock, framed as asked, and counts the connections it accepted.
type bigUpstream struct {
	addr  string
	conns atomic.Int64 // accepted
	open  atomic.Int64 // not yet closed
	// answering counts the answers being written: one the gateway stopped
	// reading stays in it until the gateway closes the connection.
	answering atomic.Int64
	// cut, when set, makes the upstream break off an answer after this
	// many bytes of body.
	cut atomic.Int64
}

func startBigUpstream(t testing.TB) *bigUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &bigUpstream{addr: ln.Addr().String()}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close() // the gateways' pools keep theirs idle
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			u.open.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				u.serve(c)
			}()
		}
	}()
	return u
}

func (u *bigUpstream) serve(c net.Conn) {
	defer u.open.Add(-1)
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		n, _ := strconv.Atoi(req.URL.Query().Get("n"))
		frame := req.URL.Query().Get("frame")
		bw := bufio.NewWriterSize(c, 64<<10)
		switch frame {
		case "chunked":
			fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		case "close":
			fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n")
		default:
			fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", n)
		}
		cut := u.cut.Load()
		sent := 0
		u.answering.Add(1)
		for sent < n {
			k := min(n-sent, len(bigBlock))
			if cut > 0 && int64(sent+k) > cut {
				k = int(cut) - sent
			}
			if frame == "chunked" {
				fmt.Fprintf(bw, "%x\r\n", k)
			}
			if _, err := bw.Write(bigBlock[:k]); err != nil {
				u.answering.Add(-1)
				return
			}
			if frame == "chunked" {
				bw.WriteString("\r\n")
			}
			sent += k
			if cut > 0 && int64(sent) >= cut {
				_ = bw.Flush()
				u.answering.Add(-1)
				return // broken off mid-answer
			}
		}
		if frame == "chunked" {
			bw.WriteString("0\r\n\r\n")
		}
		err = bw.Flush()
		u.answering.Add(-1)
		if err != nil || frame == "close" {
			return
		}
	}
}

const bigConfig = `
services:
  up:
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 500ms, read: 2s, total: 5s}
routes:
  - name: all
    match: {prefix: /}
    service: up
`

// readWholeAnswer reads one answer off br: its status, fields and body
// (Content-Length, chunked, or to the close), hashing the body.
func readWholeAnswer(t testing.TB, br *bufio.Reader, method string) (resp *http.Response, size int, digest [32]byte) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		t.Fatalf("reading the body after %d bytes: %v", n, err)
	}
	copy(digest[:], h.Sum(nil))
	return resp, int(n), digest
}

// TestAnswersStreamedWhole: answers of every framing, below and above the
// window, reach the client whole and in order, on every transport, and
// the client's and the backend's connections are kept for the next
// request.
func TestAnswersStreamedWhole(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := startBigUpstream(t) // its own: the test counts its dials
			gw := gatewaytest.Start(t, bigConfig, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.addr}})
			conn, err := net.Dial("tcp", gw.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			before := up.conns.Load()
			for _, n := range []int{0, 1000, 256 << 10, 256<<10 + 1, 3<<20 + 7} {
				for _, frame := range []string{"length", "chunked"} {
					fmt.Fprintf(conn, "GET /big?n=%d&frame=%s HTTP/1.1\r\nHost: x\r\n\r\n", n, frame)
					resp, size, digest := readWholeAnswer(t, br, "GET")
					if resp.StatusCode != 200 || size != n || digest != bigDigest(n) {
						t.Fatalf("n=%d %s: status %d, %d bytes, digest match %v", n, frame, resp.StatusCode, size, digest == bigDigest(n))
					}
					if resp.Close {
						t.Fatalf("n=%d %s: the gateway closed a keep-alive connection", n, frame)
					}
				}
			}
			// HEAD of a large answer: the length, no body.
			fmt.Fprintf(conn, "HEAD /big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", 5<<20)
			resp, size, _ := readWholeAnswer(t, br, "HEAD")
			if resp.StatusCode != 200 || size != 0 || resp.ContentLength != 5<<20 {
				t.Fatalf("HEAD: status %d, %d body bytes, length %d", resp.StatusCode, size, resp.ContentLength)
			}
			// Every answer read to its end leaves the backend's
			// connection to the next request: one dial, or a few where a
			// pool is shared.
			if d := up.conns.Load() - before; d > 2 {
				t.Errorf("%d backend connections dialled for 11 sequential requests", d)
			}
			// A body that ends with the backend's close.
			fmt.Fprintf(conn, "GET /big?n=%d&frame=close HTTP/1.1\r\nHost: x\r\n\r\n", 1<<20)
			resp, size, digest := readWholeAnswer(t, br, "GET")
			if resp.StatusCode != 200 || size != 1<<20 || digest != bigDigest(1<<20) {
				t.Fatalf("close-delimited: status %d, %d bytes", resp.StatusCode, size)
			}
		})
	}
}

// TestStreamedToHTTP10Client: an HTTP/1.0 client cannot take a chunked
// answer; a streamed body without a length reaches it whole, ended by the
// connection's close, and one with a length keeps its connection.
func TestStreamedToHTTP10Client(t *testing.T) {
	up := startBigUpstream(t)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			gw := gatewaytest.Start(t, bigConfig, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.addr}})
			const n = 2<<20 + 3
			for _, frame := range []string{"chunked", "length"} {
				c, err := net.Dial("tcp", gw.Addr)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(c, "GET /big?n=%d&frame=%s HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", n, frame)
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				resp, size, digest := readWholeAnswer(t, br, "GET")
				if kind == "fasthttp" && frame == "chunked" {
					// fasthttp's server can only write it chunked: refused.
					if resp.StatusCode != 502 || !resp.Close || len(resp.TransferEncoding) != 0 {
						t.Fatalf("fasthttp, chunked to HTTP/1.0: status %d, close %v, framing %v", resp.StatusCode, resp.Close, resp.TransferEncoding)
					}
					c.Close()
					continue
				}
				if resp.StatusCode != 200 || size != n || digest != bigDigest(n) || len(resp.TransferEncoding) != 0 {
					t.Fatalf("%s: status %d, %d bytes, framing %v", frame, resp.StatusCode, size, resp.TransferEncoding)
				}
				if frame == "chunked" {
					if _, err := br.ReadByte(); err != io.EOF {
						t.Fatalf("chunked to HTTP/1.0: the connection stayed open after a body ended by its close (%v)", err)
					}
				} else if resp.Close {
					t.Fatalf("length to HTTP/1.0 keep-alive: the connection was closed")
				}
				c.Close()
			}
		})
	}
}

// TestAnswerCutShortClosesClient: a backend that breaks off a streamed
// answer leaves the client with a short body on a connection that then
// closes, never with a connection that looks whole.
func TestAnswerCutShortClosesClient(t *testing.T) {
	up := startBigUpstream(t)
	up.cut.Store(1 << 20)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			gw := gatewaytest.Start(t, bigConfig, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.addr}})
			for _, frame := range []string{"length", "chunked"} {
				conn, err := net.Dial("tcp", gw.Addr)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(conn, "GET /big?n=%d&frame=%s HTTP/1.1\r\nHost: x\r\n\r\n", 4<<20, frame)
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				all, err := io.ReadAll(conn)
				conn.Close()
				if err != nil {
					t.Fatalf("%s: the connection was not closed: %v", frame, err)
				}
				if bytes.HasPrefix(all, []byte("HTTP/1.1 200")) && len(all) >= 4<<20 {
					t.Fatalf("%s: %d bytes: a cut answer arrived whole", frame, len(all))
				}
				if frame == "chunked" && bytes.HasSuffix(all, []byte("0\r\n\r\n")) {
					t.Fatalf("chunked: a cut answer was ended as if whole")
				}
			}
		})
	}
}

// dialSmallWindow connects with a 4 KiB receive buffer, as a client that
// means to stop reading does.
func dialSmallWindow(addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	return d.Dial("tcp", addr)
}

// TestStalledClientsHoldNoAnswer is the finding: ten clients ask for 60 MB
// each and never read. The gateway must hold a window per answer, not the
// answer: its memory grows by well under 100 MiB, another client is
// served meanwhile, and when the stalled clients' write timeout passes
// their backend connections are closed and the memory falls back.
func TestStalledClientsHoldNoAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 600 MB of answers")
	}
	up := startBigUpstream(t)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			gw := gatewaytest.Start(t, bigConfig, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.addr}, Tweak: func(o *server.Options) {
				o.WriteTimeout = 3 * time.Second
			}})
			base := testutil.SampleMem()
			var conns []net.Conn
			for range 10 {
				c, err := dialSmallWindow(gw.Addr)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				fmt.Fprintf(c, "GET /big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", 60_000_000)
			}
			time.Sleep(1500 * time.Millisecond) // long enough to read 600 MB from loopback
			held := testutil.SampleMem()
			// Another client is served meanwhile.
			st, body, err := fasthttp.GetTimeout(nil, "http://"+gw.Addr+"/big?n=1000", 2*time.Second)
			if err != nil || st != 200 || len(body) != 1000 {
				t.Fatalf("a reading client was not served while others stalled: %d, %d bytes, %v", st, len(body), err)
			}
			if g := testutil.Grew(base.RSS, held.RSS); g > 100*testutil.MiB {
				t.Errorf("RSS grew %d MiB with 10 stalled 60 MB answers (want < 100)", g/testutil.MiB)
			}
			if g := testutil.Grew(base.Live, held.Live); g > 40*testutil.MiB {
				t.Errorf("live heap grew %d MiB with 10 stalled 60 MB answers", g/testutil.MiB)
			}
			t.Logf("%s: RSS %d → %d MiB, live heap %d → %d MiB", kind, base.RSS/testutil.MiB, held.RSS/testutil.MiB, base.Live/testutil.MiB, held.Live/testutil.MiB)
			// The stalled answers are cut when write_timeout passes, and
			// their backend connections closed: the upstream sees them go.
			deadline := time.Now().Add(15 * time.Second)
			for up.answering.Load() > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d backend answers still held open 15 s after they stalled", up.answering.Load())
				}
				time.Sleep(100 * time.Millisecond)
			}
			after := testutil.SampleMem()
			t.Logf("%s: after the stalled answers were cut: RSS %d MiB, live heap %d MiB", kind, after.RSS/testutil.MiB, after.Live/testutil.MiB)
			if g := testutil.Grew(base.Live, after.Live); g > 8*testutil.MiB {
				t.Errorf("live heap still %d MiB above the start once the answers were cut", g/testutil.MiB)
			}
			for _, c := range conns {
				c.Close()
			}
		})
	}
}

// TestH2ZeroWindowHoldsNoAnswer is the HTTP/2 finding: one TLS connection
// that sets SETTINGS_INITIAL_WINDOW_SIZE to 0 and opens 100 streams of
// 20 MB answers. Each stream holds a window, not its answer: the
// gateway's memory grows by well under 100 MiB, another client is served
// meanwhile, and once write_timeout passes the streams are cut, their
// backend connections closed, and the memory is back.
func TestH2ZeroWindowHoldsNoAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 100 streams of 20 MB")
	}
	up := startBigUpstream(t)
	e := gatewaytest.StartH2(t, bigConfig, h2.Options{MaxConcurrentStreams: 128, WriteTimeout: 3 * time.Second}, gatewaytest.Options{Vars: map[string]string{"UP": up.addr}, Tweak: func(o *server.Options) {
		o.WriteTimeout = 3 * time.Second
	}})
	base := testutil.SampleMem()
	r := e.DialH2(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	// The client acknowledges the server's settings and otherwise reads
	// only headers: no window is ever given.
	var writing sync.Mutex // the framer writes from both goroutines
	go func() {
		for {
			f, err := r.Framer.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				writing.Lock()
				_ = r.Framer.WriteSettingsAck()
				writing.Unlock()
			}
		}
	}()
	for range 100 {
		writing.Lock()
		r.Send(nil, gatewaytest.H2Get("/big?n=20000000")...)
		writing.Unlock()
	}
	time.Sleep(1500 * time.Millisecond)
	held := testutil.SampleMem()
	if resp, body := e.Do(t, e.Client(true), "GET", "/big?n=1000", nil, nil); resp.StatusCode != 200 || len(body) != 1000 {
		t.Fatalf("another h2 client was not served meanwhile: %d, %d bytes", resp.StatusCode, len(body))
	}
	t.Logf("RSS %d → %d MiB, live heap %d → %d MiB, %d answers being written upstream", base.RSS/testutil.MiB, held.RSS/testutil.MiB, base.Live/testutil.MiB, held.Live/testutil.MiB, up.answering.Load())
	if g := testutil.Grew(base.RSS, held.RSS); g > 100*testutil.MiB {
		t.Errorf("RSS grew %d MiB with 100 zero-window streams of 20 MB (want < 100)", g/testutil.MiB)
	}
	if g := testutil.Grew(base.Live, held.Live); g > 60*testutil.MiB {
		t.Errorf("live heap grew %d MiB with 100 zero-window streams of 20 MB", g/testutil.MiB)
	}
	deadline := time.Now().Add(15 * time.Second)
	for up.answering.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d backend answers still held 15 s after the streams stalled", up.answering.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	after := testutil.SampleMem()
	t.Logf("after the streams were cut: RSS %d MiB, live heap %d MiB", after.RSS/testutil.MiB, after.Live/testutil.MiB)
	if g := testutil.Grew(base.Live, after.Live); g > 8*testutil.MiB {
		t.Errorf("live heap still %d MiB above the start once the streams were cut", g/testutil.MiB)
	}
}

// TestStreamedAnswerHoldsItsSlot: a streamed answer holds its backend
// connection, and the pool's slot, until it ends, and gives both back
// when it ends, however it ends (read whole, or the client gone midway):
// with max_conns 1, every next request is served.
func TestStreamedAnswerHoldsItsSlot(t *testing.T) {
	up := startBigUpstream(t)
	const oneConn = `
services:
  up:
    instances: [{addr: "${UP}"}]
    max_conns: 1
    timeouts: {connect: 500ms, read: 2s, total: 5s}
routes:
  - name: all
    match: {prefix: /}
    service: up
`
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			gw := gatewaytest.Start(t, oneConn, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.addr}})
			for i := range 3 {
				// A client that goes away in the middle of a streamed answer.
				c, err := net.Dial("tcp", gw.Addr)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(c, "GET /big?n=%d&frame=chunked HTTP/1.1\r\nHost: x\r\n\r\n", 8<<20)
				var part [100 << 10]byte
				if _, err := io.ReadFull(c, part[:]); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
				c.Close()
				// The next request waits for the slot at most max_conn_wait,
				// so it must be free (or freed) by then.
				var st int
				var body []byte
				for try := 0; try < 50; try++ {
					st, body, err = fasthttp.GetTimeout(nil, "http://"+gw.Addr+fmt.Sprintf("/big?n=%d", 1<<20), 5*time.Second)
					if st == 200 {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err != nil || st != 200 || len(body) != 1<<20 {
					t.Fatalf("round %d: after a client left mid-answer: %d, %d bytes, %v", i, st, len(body), err)
				}
			}
		})
	}
}

// TestSlowSteadyReaderNotCut: write_timeout applies per window of a
// streamed answer, not to the whole: a client taking 8 MiB at about
// 1.3 MB/s with a 1 s write_timeout and 64 KiB windows gets all of it, over
// HTTP/1.1 on every transport and over HTTP/2; one that stops is cut.
func TestSlowSteadyReaderNotCut(t *testing.T) {
	if testing.Short() {
		t.Skip("reads slowly for seconds")
	}
	up := startBigUpstream(t)
	const windowed = `
services:
  up:
    instances: [{addr: "${UP}"}]
    answer_window: 65536
    timeouts: {connect: 500ms, read: 2s, total: 5s}
routes:
  - name: all
    match: {prefix: /}
    service: up
`
	const n = 8 << 20
	slowRead := func(t *testing.T, r io.Reader) (int, error) {
		got := 0
		for {
			k, err := io.CopyN(io.Discard, r, 256<<10)
			got += int(k)
			if err == io.EOF {
				return got, nil
			}
			if err != nil {
				return got, err
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			gw := gatewaytest.Start(t, windowed, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.addr}, Tweak: func(o *server.Options) {
				o.WriteTimeout = time.Second
			}})
			c, err := dialSmallWindow(gw.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "GET /big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", n)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got, err := slowRead(t, resp.Body)
			if err != nil || got != n {
				t.Fatalf("a steady reader was cut after %d of %d bytes (%v, %v)", got, n, time.Since(start), err)
			}
			if time.Since(start) < 2*time.Second {
				t.Fatalf("read %d bytes in %v: the test did not outlast write_timeout", n, time.Since(start))
			}
		})
	}
	t.Run("h2", func(t *testing.T) {
		t.Parallel()
		e := gatewaytest.StartH2(t, windowed, h2.Options{WriteTimeout: time.Second, StreamWindow: 64 << 10, ConnWindow: 64 << 10}, gatewaytest.Options{Vars: map[string]string{"UP": up.addr}})
		conf := &tls.Config{ServerName: "a.test", RootCAs: e.CA.Pool()}
		client := &http.Client{Transport: &http2.Transport{TLSClientConfig: conf, DisableCompression: true}}
		req, _ := http.NewRequest("GET", "https://"+e.Addr+fmt.Sprintf("/big?n=%d", n), nil)
		req.Host = "a.test"
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		start := time.Now()
		got, err := slowRead(t, resp.Body)
		if err != nil || got != n {
			t.Fatalf("a steady h2 reader was cut after %d of %d bytes (%v, %v)", got, n, time.Since(start), err)
		}
	})
}
