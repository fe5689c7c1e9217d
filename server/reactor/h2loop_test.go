package reactor_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/server/h2"
	"golang.org/x/net/http2"
)

// The HTTP/2 engine on the loops: what it owns that the shared h2 tests
// (server/h2) do not reach — flow control both ways, streams interleaved
// on one connection, a reset stream's fiber freed, floods bounded while
// other clients are served.

// h2Backend serves /big/N (N bytes of a pattern), /slow/… (after 50 ms)
// and /echo (the body's length), on a loopback port of its own.
func h2Backend(tb testing.TB) string {
	tb.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/big/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/big/"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = io.Copy(w, io.LimitReader(&patternReader{}, int64(n)))
	})
	mux.HandleFunc("/slow/", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		_, _ = io.WriteString(w, "slow "+r.URL.Path)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = fmt.Fprintf(w, "%d", n)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// patternReader yields a repeating pattern, so an answer can be checked
// byte for byte without holding it.
type patternReader struct{ off int64 }

const pattern = "0123456789abcdefghijklmnopqrstuvwxyz"

func (p *patternReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = pattern[(int(p.off)+i)%len(pattern)]
	}
	p.off += int64(len(b))
	return len(b), nil
}

func patternOK(b []byte, off int) bool {
	for i, c := range b {
		if c != pattern[(off+i)%len(pattern)] {
			return false
		}
	}
	return true
}

const h2LoopRoutes = `
services:
  up:
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 500ms, read: 5s, total: 30s}
routes:
  - name: all
    match: {prefix: /}
    service: up
`

func startLoopH2(tb testing.TB, o h2.Options) *gatewaytest.TLSEdge {
	tb.Helper()
	return gatewaytest.StartH2(tb, h2LoopRoutes, o, gatewaytest.Options{Transport: "reactor", Vars: map[string]string{"UP": h2Backend(tb)}})
}

// TestH2LoopTinyWindow: a client whose windows admit 1 byte and then a
// few hundred at a time still gets the whole answer, intact, in frames
// no larger than it allowed.
func TestH2LoopTinyWindow(t *testing.T) {
	e := startLoopH2(t, h2.Options{})
	r := e.DialH2(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
	const size = 300_000
	id := r.Send(nil, gatewaytest.H2Get(fmt.Sprintf("/big/%d", size))...)
	_ = r.Conn.SetDeadline(time.Now().Add(30 * time.Second))
	var got []byte
	for {
		f, err := r.Framer.ReadFrame()
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = r.Framer.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s != "200" {
				t.Fatalf("status %s", s)
			}
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			t.Fatalf("after %d bytes: %v", len(got), f)
		case *http2.DataFrame:
			if f.StreamID != id {
				continue
			}
			n := len(f.Data())
			if n > 1 && len(got) == 0 {
				t.Fatalf("first DATA frame of %d bytes in a window of 1", n)
			}
			if !patternOK(f.Data(), len(got)) {
				t.Fatalf("bytes %d–%d differ", len(got), len(got)+n)
			}
			got = append(got, f.Data()...)
			if f.StreamEnded() {
				if len(got) != size {
					t.Fatalf("got %d bytes, want %d", len(got), size)
				}
				return
			}
			if n > 0 {
				// Reopen by a little more than was taken: 700 bytes a time.
				_ = r.Framer.WriteWindowUpdate(id, 700)
				_ = r.Framer.WriteWindowUpdate(0, uint32(n))
			}
		}
	}
}

// TestH2LoopStalledClientBounded: a client that opens streams for large
// answers and then never opens its windows, nor reads, costs the gateway
// a bounded window per stream, not the answers; the write timeout then
// resets the streams, and other clients are served meanwhile.
func TestH2LoopStalledClientBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the write timeout")
	}
	e := startLoopH2(t, h2.Options{WriteTimeout: 2 * time.Second})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	const streams, size = 16, 64 << 20 // 1 GiB asked for in all
	r := e.DialH2(t)
	for range streams {
		r.Send(nil, gatewaytest.H2Get(fmt.Sprintf("/big/%d", size))...)
	}
	time.Sleep(time.Second)
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	// Each stream holds at most a piece of its answer (the answer window,
	// 512 KiB) and the backend's socket buffers; the connection its
	// output bound.
	bound := int64(streams)*(512<<10) + memSlack
	if grown := int64(during.HeapInuse) - int64(before.HeapInuse); grown > bound {
		t.Fatalf("heap grew %d MiB for %d stalled streams (bound %d MiB)", grown>>20, streams, bound>>20)
	}
	// Another client is served while those wait.
	start := time.Now()
	resp, body := e.Do(t, e.Client(true), "GET", "/big/10", nil, nil)
	if resp.StatusCode != 200 || string(body) != pattern[:10] || time.Since(start) > time.Second {
		t.Fatalf("another client: %d %q after %v", resp.StatusCode, body, time.Since(start))
	}
	// The stalled streams are reset once the write timeout passes.
	_ = r.Conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	resets := 0
	for resets < streams {
		f, err := r.Framer.ReadFrame()
		if err != nil {
			t.Fatalf("after %d resets: %v", resets, err)
		}
		if rs, ok := f.(*http2.RSTStreamFrame); ok {
			resets++
			if rs.ErrCode == http2.ErrCodeNo {
				t.Fatalf("stream %d ended without error", rs.StreamID)
			}
		}
	}
	if _, _, stalled := e.Transport.(interface {
		StreamedAnswers() (done, cut, stalled uint64)
	}).StreamedAnswers(); stalled < streams {
		t.Fatalf("%d answers counted as stalled, want %d", stalled, streams)
	}
}

// TestH2LoopInterleaved: many streams on one connection are served at
// once, not one after the other, and their answers' frames interleave.
func TestH2LoopInterleaved(t *testing.T) {
	e := startLoopH2(t, h2.Options{})
	r := e.DialH2(t)
	const n = 60
	ids := make(map[uint32]bool)
	start := time.Now()
	for i := range n {
		ids[r.Send(nil, gatewaytest.H2Get(fmt.Sprintf("/slow/%d", i))...)] = true
	}
	_ = r.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var order []uint32
	bodies := map[uint32][]byte{}
	done := 0
	for done < n {
		f, err := r.Framer.ReadFrame()
		if err != nil {
			t.Fatalf("after %d answers: %v", done, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = r.Framer.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			order = append(order, f.StreamID)
		case *http2.DataFrame:
			bodies[f.StreamID] = append(bodies[f.StreamID], f.Data()...)
			if f.StreamEnded() {
				done++
			}
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			t.Fatalf("%v", f)
		}
	}
	// Each backend call takes 50 ms: one after the other they would take 3 s.
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("%d streams took %v: not served at once", n, d)
	}
	for id := range ids {
		want := fmt.Sprintf("slow /slow/%d", (id-1)/2)
		if string(bodies[id]) != want {
			t.Fatalf("stream %d: %q, want %q", id, bodies[id], want)
		}
	}
	if slices.IsSorted(order) && len(order) == n {
		t.Logf("answers came in the order asked (possible, not required)")
	}
}

// TestH2LoopInterleavedLarge: two large answers on one connection go out
// side by side, not one after the other.
func TestH2LoopInterleavedLarge(t *testing.T) {
	e := startLoopH2(t, h2.Options{})
	r := e.DialH2(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	_ = r.Framer.WriteWindowUpdate(0, 1<<30)
	a := r.Send(nil, gatewaytest.H2Get("/big/4000000")...)
	b := r.Send(nil, gatewaytest.H2Get("/big/4000000")...)
	_ = r.Conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := map[uint32]int{}
	switches, last, ended := 0, uint32(0), 0
	for ended < 2 {
		f, err := r.Framer.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := f.(*http2.DataFrame); ok {
			if !patternOK(d.Data(), got[d.StreamID]) {
				t.Fatalf("stream %d: bytes differ at %d", d.StreamID, got[d.StreamID])
			}
			got[d.StreamID] += len(d.Data())
			if last != 0 && d.StreamID != last {
				switches++
			}
			last = d.StreamID
			if d.StreamEnded() {
				ended++
			}
		}
	}
	if got[a] != 4000000 || got[b] != 4000000 {
		t.Fatalf("got %v", got)
	}
	if switches < 2 {
		t.Fatalf("the answers went one after the other (%d switches)", switches)
	}
}

// TestH2LoopResetFreesStream: streams reset while their answers wait for
// a window the client never opens give their handler slots back: with a
// limit of two, two more streams are then served.
func TestH2LoopResetFreesStream(t *testing.T) {
	e := startLoopH2(t, h2.Options{MaxConcurrentStreams: 2, WriteTimeout: time.Minute})
	r := e.DialH2(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	a := r.Send(nil, gatewaytest.H2Get("/big/8000000")...)
	b := r.Send(nil, gatewaytest.H2Get("/big/8000000")...)
	// Both answers' headers come; their bodies wait for a window.
	_ = r.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for heads := 0; heads < 2; {
		f, err := r.Framer.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok && (h.StreamID == a || h.StreamID == b) {
			heads++
		}
	}
	_ = r.Framer.WriteRSTStream(a, http2.ErrCodeCancel)
	_ = r.Framer.WriteRSTStream(b, http2.ErrCodeCancel)
	_ = r.Framer.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
	for i := range 2 {
		if o := r.Await(r.Send(nil, gatewaytest.H2Get(fmt.Sprintf("/slow/after-%d", i))...)); o.Status != "200" {
			t.Fatalf("after the resets: %+v", o)
		}
	}
}

// TestH2LoopBodyFlowControl: a request body larger than every window
// streams through (the windows reopen as the backend takes it), and a
// client sending past its window has the stream reset.
func TestH2LoopBodyFlowControl(t *testing.T) {
	e := startLoopH2(t, h2.Options{StreamWindow: 64 << 10, ConnWindow: 128 << 10, StreamBodyBytes: 32 << 10, MaxBodyBytes: 64 << 20})
	body := bytes.Repeat([]byte("b"), 5<<20)
	resp, got := e.Do(t, e.Client(true), "POST", "/echo", body, nil)
	if resp.StatusCode != 200 || string(got) != strconv.Itoa(len(body)) {
		t.Fatalf("5 MiB body: %d %q", resp.StatusCode, got)
	}

	r := e.DialH2(t)
	fields := append([]string{":method", "POST"}, gatewaytest.H2Get("/echo")[2:]...)
	id := r.Next()
	if err := r.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.Block(fields...), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 16<<10)
	for range 5 { // 80 KiB in a 64 KiB window
		_ = r.Framer.WriteData(id, false, chunk)
	}
	o := r.Await(id)
	if o.Reset != http2.ErrCodeFlowControl {
		t.Fatalf("past the window: %+v", o)
	}
}

// TestH2LoopFloods: control frames that each need an answer, sent by a
// client that reads none, and empty DATA frames end the connection with
// ENHANCE_YOUR_CALM; frames that need none (WINDOW_UPDATE, PRIORITY,
// RST_STREAM of a closed stream) cost a frame's parsing each and are
// left to flow, as x/net does. Beside every flood another client is
// served without delay.
func TestH2LoopFloods(t *testing.T) {
	if testing.Short() {
		t.Skip("floods")
	}
	e := startLoopH2(t, h2.Options{})
	post := append([]string{":method", "POST"}, gatewaytest.H2Get("/echo")[2:]...)
	for _, flood := range []struct {
		name  string
		cut   bool
		frame func(f *http2.Framer) error
	}{
		{"ping", true, func(f *http2.Framer) error { return f.WritePing(false, [8]byte{1}) }},
		{"settings", true, func(f *http2.Framer) error { return f.WriteSettings() }},
		{"empty data", true, func(f *http2.Framer) error { return f.WriteData(1, false, nil) }},
		{"window update", false, func(f *http2.Framer) error { return f.WriteWindowUpdate(1, 1) }},
		{"priority", false, func(f *http2.Framer) error {
			return f.WritePriority(1, http2.PriorityParam{StreamDep: 0, Weight: 1})
		}},
		{"reset of a closed stream", false, func(f *http2.Framer) error { return f.WriteRSTStream(1, http2.ErrCodeCancel) }},
	} {
		t.Run(flood.name, func(t *testing.T) {
			r := e.DialH2(t)
			// Stream 1, which the flood's frames name: open, its body coming.
			if err := r.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: r.Next(), BlockFragment: r.Block(post...), EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			if flood.name == "reset of a closed stream" {
				_ = r.Framer.WriteRSTStream(1, http2.ErrCodeCancel)
			}
			lat := make(chan []time.Duration, 1)
			stop, ready := make(chan struct{}), make(chan struct{})
			go func() {
				var got []time.Duration
				defer func() { lat <- got }()
				c := e.Client(true)
				// Connected before the flood: its latency is the requests'.
				if resp, err := c.Get("https://" + e.Addr + "/big/10"); err == nil {
					resp.Body.Close()
				}
				close(ready)
				for {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					req, _ := http.NewRequest("GET", "https://"+e.Addr+"/big/10", nil)
					req.Host = "a.test"
					resp, err := c.Do(req)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						got = append(got, time.Since(start))
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
			<-ready
			limit := 3 * time.Second
			if flood.cut {
				limit = 20 * time.Second
			}
			// A thousand frames a write: the flood costs the client little
			// and the gateway all it can.
			var batch bytes.Buffer
			fr := http2.NewFramer(&batch, nil)
			for range 1000 {
				_ = flood.frame(fr)
			}
			sent, start := 0, time.Now()
			_ = r.Conn.SetWriteDeadline(time.Now().Add(limit))
			for time.Since(start) < limit {
				if _, err := r.Conn.Write(batch.Bytes()); err != nil {
					break
				}
				sent += 1000
			}
			cut := time.Since(start) < limit
			close(stop)
			got := <-lat
			if cut != flood.cut {
				t.Fatalf("%d frames sent in %v: cut %v, want %v", sent, time.Since(start), cut, flood.cut)
			}
			if len(got) == 0 {
				t.Fatal("no request served beside the flood")
			}
			slices.Sort(got)
			median := got[len(got)/2]
			t.Logf("%d frames sent; beside them %d requests, median %v, max %v", sent, len(got), median, got[len(got)-1])
			bound := 5 * time.Millisecond
			if raceEnabled {
				bound = 50 * time.Millisecond
			}
			if len(got) >= 5 && median > bound {
				t.Fatalf("another client's median latency %v during the flood", median)
			}
		})
	}
	// Over TLS the reader stops while the writer is held inside the
	// session by a client that reads nothing: such a flood may end in
	// the kernel's buffers and the write timeout rather than the count.
	refused := e.H2.Stats().Refused
	if refused["conn_ENHANCE_YOUR_CALM_empty_data_flood"] != 1 {
		t.Fatalf("refusals %v", refused)
	}
}

// TestH2LoopControlFloodH2C: over cleartext, where nothing holds the
// reader while the writer waits, PINGs from a client that reads none of
// the acks are cut at the bound of unwritten control answers.
func TestH2LoopControlFloodH2C(t *testing.T) {
	g, _ := gatewaytest.StartRecorded(t, h2LoopRoutes, gatewaytest.Options{Transport: "reactor", Vars: map[string]string{"UP": h2Backend(t)}})
	r := gatewaytest.DialH2C(t, g.Addr)
	_ = r.Conn.(*net.TCPConn).SetReadBuffer(4096) // the acks back up soon
	// A thousand PINGs a write: 9 bytes of header, 8 of data each.
	ping := []byte{0, 0, 8, byte(http2.FramePing), 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	batch := bytes.Repeat(ping, 1000)
	start := time.Now()
	_ = r.Conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
	sent := 0
	for ; time.Since(start) < 20*time.Second; sent += 1000 {
		if _, err := r.Conn.Write(batch); err != nil {
			break
		}
	}
	if n := g.H2C.Stats().Refused["conn_ENHANCE_YOUR_CALM_over_max_control_frames"]; n != 1 {
		t.Fatalf("after %d PINGs in %v: refusals %v", sent, time.Since(start), g.H2C.Stats().Refused)
	}
	t.Logf("cut after %d PINGs, %v", sent, time.Since(start))
}

// TestH2LoopPrefaceTimeout: a connection that chose h2 (ALPN, or the
// start of the preface on cleartext) and then sends nothing more is
// closed at the header timeout, not held.
func TestH2LoopPrefaceTimeout(t *testing.T) {
	tweak := gatewaytest.Options{Transport: "reactor", Vars: map[string]string{"UP": h2Backend(t)},
		Tweak: func(o *server.Options) { o.HeaderTimeout = 300 * time.Millisecond }}
	e := gatewaytest.StartH2(t, h2LoopRoutes, h2.Options{}, tweak)
	tlsConn, err := tls.Dial("tcp", e.Addr, &tls.Config{ServerName: "a.test", RootCAs: e.CA.Pool(), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tlsConn.Close()
	g, _ := gatewaytest.StartRecorded(t, h2LoopRoutes, tweak)
	plain, err := net.Dial("tcp", g.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := io.WriteString(plain, http2.ClientPreface[:10]); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]net.Conn{"h2 over TLS": tlsConn, "h2c": plain} {
		start := time.Now()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("%s: still open after %v", name, time.Since(start))
		}
	}
}
