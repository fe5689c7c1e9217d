package upstream_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/server"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/encoding/protowire"
)

// rawGRPCBackend is an h2c backend written frame by frame: each call is
// answered by the test's script, so a backend can break HTTP/2 in ways a
// real server library never would.
type rawGRPCBackend struct {
	ln     net.Listener
	answer func(w *rawAnswerer, stream uint32)

	// settings are what the backend announces (its decoder holds the
	// gateway to a SETTINGS_HEADER_TABLE_SIZE among them).
	settings []http2.Setting

	mu     sync.Mutex
	pings  [][8]byte // PING acknowledgements the gateway sent
	conns  int
	paths  []string // the :path of every call, as decoded
	broken error    // a header block that did not decode
	data   int      // DATA bytes received
	resets int      // RST_STREAM frames received
}

// rawAnswerer writes a script's frames on one connection.
type rawAnswerer struct {
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

// block encodes fields (name, value pairs) as a header block.
func (w *rawAnswerer) block(fields ...string) []byte {
	w.hbuf.Reset()
	for i := 0; i < len(fields); i += 2 {
		_ = w.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return bytes.Clone(w.hbuf.Bytes())
}

// order is an OK answer's message framed for gRPC: an Order with its id.
func order(id string) []byte {
	msg := protowire.AppendTag(nil, 1, protowire.BytesType)
	msg = protowire.AppendString(msg, id)
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
}

// ok answers the call as a well-behaved server does.
func (w *rawAnswerer) ok(stream uint32, id string) {
	_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, EndHeaders: true,
		BlockFragment: w.block(":status", "200", "content-type", "application/grpc")})
	_ = w.fr.WriteData(stream, false, order(id))
	_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, EndHeaders: true, EndStream: true,
		BlockFragment: w.block("grpc-status", "0")})
}

// writeLongBlock writes a header block over several frames.
func writeLongBlock(w *rawAnswerer, s uint32, blk []byte) {
	_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s, BlockFragment: blk[:16000]})
	for rest := blk[16000:]; len(rest) > 0; {
		n := min(len(rest), 16000)
		_ = w.fr.WriteContinuation(s, n == len(rest), rest[:n])
		rest = rest[n:]
	}
}

func startRawGRPCBackend(t *testing.T, settings []http2.Setting, answer func(w *rawAnswerer, stream uint32)) *rawGRPCBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &rawGRPCBackend{ln: ln, answer: answer, settings: settings}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns++
			b.mu.Unlock()
			go b.serve(c)
		}
	}()
	return b
}

func (b *rawGRPCBackend) serve(c net.Conn) {
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	w := &rawAnswerer{fr: http2.NewFramer(c, c)}
	w.enc = hpack.NewEncoder(&w.hbuf)
	dec := hpack.NewDecoder(4096, nil)
	for _, s := range b.settings {
		if s.ID == http2.SettingHeaderTableSize {
			dec.SetAllowedMaxDynamicTableSize(s.Val)
		}
	}
	_ = w.fr.WriteSettings(b.settings...)
	for {
		f, err := w.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			b.mu.Lock()
			if err != nil && b.broken == nil {
				b.broken = err
			}
			for _, h := range fields {
				if h.Name == ":path" {
					b.paths = append(b.paths, h.Value)
				}
			}
			b.mu.Unlock()
		case *http2.RSTStreamFrame:
			b.mu.Lock()
			b.resets++
			b.mu.Unlock()
		case *http2.DataFrame:
			b.mu.Lock()
			b.data += len(f.Data())
			b.mu.Unlock()
			if f.StreamEnded() {
				b.answer(w, f.StreamID)
			}
		case *http2.PingFrame:
			if f.IsAck() {
				b.mu.Lock()
				b.pings = append(b.pings, f.Data)
				b.mu.Unlock()
			}
		}
	}
}

// TestGRPCOnTheLoopHeaderTable: the fixed fields of a call go through
// the backend's HPACK table, within the size its SETTINGS allow (none at
// all, a little, the default), and every call's header block decodes to
// its method at the backend.
func TestGRPCOnTheLoopHeaderTable(t *testing.T) {
	for _, size := range []uint32{0, 100, 4096} {
		t.Run(strconv.Itoa(int(size)), func(t *testing.T) {
			be := startRawGRPCBackend(t, []http2.Setting{{ID: http2.SettingHeaderTableSize, Val: size}}, func(w *rawAnswerer, s uint32) { w.ok(s, "o-t") })
			g := gatewaytest.Start(t, rawGRPCRoutes, gatewaytest.Options{Vars: map[string]string{"UP": be.ln.Addr().String(), "PB": ordersPB(t)},
				Tweak: func(o *server.Options) { o.Workers = 1 }})
			for i := range 5 {
				if st, body, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"a","quantity":1}`); st != 200 || body["id"] != "o-t" {
					t.Fatalf("call %d: %d %s", i, st, raw)
				}
			}
			be.mu.Lock()
			defer be.mu.Unlock()
			if be.broken != nil || len(be.paths) != 5 || be.conns != 1 {
				t.Fatalf("decoding: %v; paths %q over %d connections", be.broken, be.paths, be.conns)
			}
			for _, p := range be.paths {
				if p != "/shop.v1.Orders/Create" {
					t.Fatalf("paths %q", be.paths)
				}
			}
		})
	}
}

// TestGRPCOnTheLoopBackendThatOpensNoWindow: a backend that opens a
// window of 10 bytes and never more (announced in its SETTINGS, which
// bind the calls made after them) gets 10 bytes of a larger message;
// the call waits only within its budget (504), its stream is reset, and
// the gateway answers the next call (another window-bound one) the same
// way instead of piling data up.
func TestGRPCOnTheLoopBackendThatOpensNoWindow(t *testing.T) {
	be := startRawGRPCBackend(t, []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 10}}, func(w *rawAnswerer, s uint32) {
		w.ok(s, "o-never")
	})
	g := gatewaytest.Start(t, rawGRPCRoutes, gatewaytest.Options{Vars: map[string]string{"UP": be.ln.Addr().String(), "PB": ordersPB(t)},
		Tweak: func(o *server.Options) { o.Workers = 1 }})
	// The first call goes out with the connection, before the backend's
	// SETTINGS came: HTTP/2's default window applies to it.
	if st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"a","quantity":1}`); st != 200 {
		t.Fatalf("the first call: %d %s", st, raw)
	}
	be.mu.Lock()
	before := be.data
	be.mu.Unlock()
	for i := range 2 {
		start := time.Now()
		st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"a-long-sku-past-ten-bytes","quantity":1}`)
		if took := time.Since(start); st != 504 || took > 3*time.Second {
			t.Fatalf("call %d: %d %s after %v", i, st, raw, took)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		be.mu.Lock()
		data, resets := be.data-before, be.resets
		be.mu.Unlock()
		if data == 20 && resets == 2 {
			break
		}
		if time.Now().After(deadline) || data > 20 {
			t.Fatalf("the backend got %d bytes of DATA and %d resets; want 10 bytes and one reset a call", data, resets)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (b *rawGRPCBackend) seen() (conns int, pings [][8]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns, append([][8]byte(nil), b.pings...)
}

const rawGRPCRoutes = `
services:
  orders:
    protocol: grpc
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 200ms, read: 1s, total: 1s}
routes:
  - name: create
    match: {path: /v1/orders, methods: [POST]}
    grpc: {service: shop.v1.Orders, method: Create, descriptors: "${PB}"}
    service: orders
`

// TestGRPCOnTheLoopHostileBackend: a backend's answers split, padded and
// prioritised as HTTP/2 allows are read as any; one that breaks the
// protocol (a frame larger than the gateway allows, a frame inside a
// header block, a header block on a stream never opened, a push, a header
// list over the bound, a block that does not decode) fails the call with
// a clear status and costs its connection, and the next call is answered
// on a new one; resets and GOAWAY end only the calls they name; a PING is
// acknowledged.
func TestGRPCOnTheLoopHostileBackend(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   func(w *rawAnswerer, stream uint32)
		status   int
		contains string
		newConn  bool // the gateway must have dropped the connection
	}{
		{"split and padded", func(w *rawAnswerer, s uint32) {
			blk := w.block(":status", "200", "content-type", "application/grpc", "x-one", "1")
			_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s, BlockFragment: blk[:3], PadLength: 7,
				Priority: http2.PriorityParam{StreamDep: 0, Weight: 9}})
			_ = w.fr.WriteContinuation(s, false, blk[3:5])
			_ = w.fr.WriteContinuation(s, true, blk[5:])
			msg := order("o-split")
			_ = w.fr.WriteDataPadded(s, false, msg[:4], make([]byte, 3))
			_ = w.fr.WritePriority(s, http2.PriorityParam{Weight: 1})
			_ = w.fr.WriteDataPadded(s, false, msg[4:], nil)
			_ = w.fr.WritePing(false, [8]byte{7, 7})
			_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s, EndHeaders: true, EndStream: true, PadLength: 1,
				BlockFragment: w.block("grpc-status", "0")})
		}, 200, `"id":"o-split"`, false},
		{"frame over 16384 bytes", func(w *rawAnswerer, s uint32) {
			_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s, EndHeaders: true,
				BlockFragment: w.block(":status", "200", "content-type", "application/grpc")})
			_ = w.fr.WriteData(s, false, make([]byte, 20000))
		}, 503, "16384", true},
		{"data inside a header block", func(w *rawAnswerer, s uint32) {
			_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s, BlockFragment: w.block(":status", "200")})
			_ = w.fr.WriteData(s, false, order("o-x"))
		}, 503, "inside a header block", true},
		{"headers on a stream never opened", func(w *rawAnswerer, s uint32) {
			_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s + 200, EndHeaders: true, BlockFragment: w.block(":status", "200")})
		}, 503, "did not open", true},
		{"push promise", func(w *rawAnswerer, s uint32) {
			_ = w.fr.WritePushPromise(http2.PushPromiseParam{StreamID: s, PromiseID: 2, EndHeaders: true, BlockFragment: w.block(":path", "/")})
		}, 503, "PUSH_PROMISE", true},
		{"header block that does not decode", func(w *rawAnswerer, s uint32) {
			_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s, EndHeaders: true, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}})
		}, 503, "does not decode", true},
		{"a field over the bound", func(w *rawAnswerer, s uint32) {
			writeLongBlock(w, s, w.block(":status", "200", "x-huge", strings.Repeat("v", 70<<10)))
		}, 503, "string too long", true},
		{"header list over the bound", func(w *rawAnswerer, s uint32) {
			// 80 KB of fields in a block of about 50 KB (Huffman-coded).
			fields := []string{":status", "200"}
			for i := range 20 {
				fields = append(fields, "x-many-"+strconv.Itoa(i), strings.Repeat("a", 4000))
			}
			writeLongBlock(w, s, w.block(fields...))
		}, 500, "header list is over", false},
		{"reset", func(w *rawAnswerer, s uint32) {
			_ = w.fr.WriteRSTStream(s, http2.ErrCodeRefusedStream)
		}, 503, "REFUSED_STREAM", false},
		{"goaway", func(w *rawAnswerer, s uint32) {
			_ = w.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
		}, 503, "GOAWAY", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			calls := 0
			be := startRawGRPCBackend(t, nil, func(w *rawAnswerer, s uint32) {
				mu.Lock()
				calls++
				first := calls == 1
				mu.Unlock()
				if first {
					tc.script(w, s)
					return
				}
				w.ok(s, "o-next")
			})
			g := gatewaytest.Start(t, rawGRPCRoutes, gatewaytest.Options{Vars: map[string]string{"UP": be.ln.Addr().String(), "PB": ordersPB(t)},
				Tweak: func(o *server.Options) { o.Workers = 1 }})
			st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"a","quantity":1}`)
			if st != tc.status || !strings.Contains(raw, tc.contains) {
				t.Fatalf("first call: %d %s; want %d with %q", st, raw, tc.status, tc.contains)
			}
			st, body, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"b","quantity":1}`)
			if st != 200 || body["id"] != "o-next" {
				t.Fatalf("the call after: %d %s", st, raw)
			}
			conns, pings := be.seen()
			if tc.newConn != (conns == 2) || conns > 2 {
				t.Fatalf("%d connections to the backend (a new one wanted: %v)", conns, tc.newConn)
			}
			if tc.name == "split and padded" {
				deadline := time.Now().Add(2 * time.Second)
				for len(pings) == 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
					_, pings = be.seen()
				}
				if len(pings) != 1 || pings[0] != [8]byte{7, 7} {
					t.Fatalf("PING acknowledgements: %v", pings)
				}
			}
		})
	}
}
