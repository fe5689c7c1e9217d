package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/hpackenc"
	"github.com/tollgate/tollgate/internal/testutil/grpcorders"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// rawCodec passes messages as bytes: both engines get the very same
// request bytes, and their replies are compared as messages.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error) {
	return *v.(*[]byte), nil
}
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

func startLean(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() { _ = serveLean(ln) }()
	return ln.Addr().String()
}

func dialGRPC(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// files is the order service's descriptors, one set for every message
// (proto.Equal holds only between messages of the same descriptors).
var files = sync.OnceValue(func() *protoregistry.Files {
	f, err := protodesc.NewFiles(mustSet())
	if err != nil {
		panic(err)
	}
	return f
})

func mustSet() *descriptorpb.FileDescriptorSet {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(grpcorders.DescriptorSet, &set); err != nil {
		panic(err)
	}
	return &set
}

// message builds a request of the order service from field values.
func message(t testing.TB, name string, set func(m *dynamicpb.Message, f func(string) protoreflect.FieldDescriptor)) []byte {
	t.Helper()
	d, err := files().FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(d.(protoreflect.MessageDescriptor))
	set(m, func(n string) protoreflect.FieldDescriptor {
		return m.Descriptor().Fields().ByName(protoreflect.Name(n))
	})
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type callResult struct {
	code    string
	message string
	reply   proto.Message
	trace   []string
}

func call(t *testing.T, cc *grpc.ClientConn, method string, req []byte, timeout time.Duration) callResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var reply []byte
	var trailer metadata.MD
	err := cc.Invoke(ctx, method, &req, &reply, grpc.Trailer(&trailer))
	st := status.Convert(err)
	r := callResult{code: st.Code().String(), message: st.Message(), trace: trailer.Get("x-order-trace")}
	if err == nil {
		d, ferr := files().FindDescriptorByName("shop.v1.Order")
		if ferr != nil {
			t.Fatal(ferr)
		}
		m := dynamicpb.NewMessage(d.(protoreflect.MessageDescriptor))
		if uerr := proto.Unmarshal(reply, m); uerr != nil {
			t.Fatalf("%s: a reply that does not parse: %v", method, uerr)
		}
		r.reply = m
	}
	return r
}

// TestLeanAnswersAsGRPCGo: every behaviour of the order service, called
// with the same bytes through a real grpc-go client, answers the same on
// the lean engine as on grpc-go serving grpcorders: replies equal as
// messages, the same codes and messages, the same trailer.
func TestLeanAnswersAsGRPCGo(t *testing.T) {
	ref := grpcorders.Start(t)
	lean, grpcGo := dialGRPC(t, startLean(t)), dialGRPC(t, ref.Addr)
	create := func(sku string, qty int32) []byte {
		return message(t, "shop.v1.CreateOrderRequest", func(m *dynamicpb.Message, f func(string) protoreflect.FieldDescriptor) {
			m.Set(f("sku"), protoreflect.ValueOfString(sku))
			m.Set(f("quantity"), protoreflect.ValueOfInt32(qty))
			m.Set(f("customer_id"), protoreflect.ValueOfString("c-7"))
			notes := m.Mutable(f("notes")).Map()
			notes.Set(protoreflect.ValueOfString("gift").MapKey(), protoreflect.ValueOfString("wrap it"))
			notes.Set(protoreflect.ValueOfString("door").MapKey(), protoreflect.ValueOfString("back"))
			tags := m.Mutable(f("tags")).List()
			tags.Append(protoreflect.ValueOfString("a"))
			tags.Append(protoreflect.ValueOfString("b"))
		})
	}
	get := func(id string, withItems bool, limit int32) []byte {
		return message(t, "shop.v1.GetOrderRequest", func(m *dynamicpb.Message, f func(string) protoreflect.FieldDescriptor) {
			m.Set(f("id"), protoreflect.ValueOfString(id))
			m.Set(f("with_items"), protoreflect.ValueOfBool(withItems))
			m.Set(f("limit"), protoreflect.ValueOfInt32(limit))
		})
	}
	for _, tc := range []struct {
		name, method string
		req          []byte
		timeout      time.Duration
	}{
		{"create", "/shop.v1.Orders/Create", create("abc", 3), time.Second},
		{"create, long sku", "/shop.v1.Orders/Create", create(string(make([]byte, 300)), 1), time.Second},
		{"missing", "/shop.v1.Orders/Create", create("missing", 1), time.Second},
		{"boom", "/shop.v1.Orders/Create", create("boom", 1), time.Second},
		{"busy", "/shop.v1.Orders/Create", create("busy", 1), time.Second},
		{"no quantity", "/shop.v1.Orders/Create", create("x", 0), time.Second},
		{"slow", "/shop.v1.Orders/Create", create("slow", 1), time.Second},
		{"hang", "/shop.v1.Orders/Create", create("hang", 1), 200 * time.Millisecond},
		{"get", "/shop.v1.Orders/Get", get("o-1", false, 0), time.Second},
		{"get with items", "/shop.v1.Orders/Get", get("o-1", true, 4), time.Second},
		{"get missing", "/shop.v1.Orders/Get", get("missing", true, 4), time.Second},
		{"empty request", "/shop.v1.Orders/Get", nil, time.Second},
		{"unknown method", "/shop.v1.Orders/Delete", nil, time.Second},
		{"unknown service", "/shop.v1.Carts/Create", nil, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := call(t, grpcGo, tc.method, tc.req, tc.timeout)
			got := call(t, lean, tc.method, tc.req, tc.timeout)
			if tc.name == "hang" {
				// Whether the server's deadline answer or the client's
				// own reset ends the call first is a race on either
				// server: only the code is certain.
				if got.code != "DeadlineExceeded" || want.code != got.code {
					t.Fatalf("lean %s, grpc-go %s", got.code, want.code)
				}
				return
			}
			if got.code != want.code || got.message != want.message || fmt.Sprint(got.trace) != fmt.Sprint(want.trace) {
				t.Fatalf("lean %s %q trailer %v; grpc-go %s %q trailer %v", got.code, got.message, got.trace, want.code, want.message, want.trace)
			}
			if (got.reply == nil) != (want.reply == nil) || got.reply != nil && !proto.Equal(got.reply, want.reply) {
				t.Fatalf("lean replied %v, grpc-go %v", got.reply, want.reply)
			}
		})
	}
}

// TestLeanManyCallsAtOnce: calls on one connection from many goroutines
// each get their own answer.
func TestLeanManyCallsAtOnce(t *testing.T) {
	cc := dialGRPC(t, startLean(t))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				sku := fmt.Sprintf("s%d-%d", w, i)
				req := message(t, "shop.v1.CreateOrderRequest", func(m *dynamicpb.Message, f func(string) protoreflect.FieldDescriptor) {
					m.Set(f("sku"), protoreflect.ValueOfString(sku))
					m.Set(f("quantity"), protoreflect.ValueOfInt32(1))
				})
				var reply []byte
				if err := cc.Invoke(context.Background(), "/shop.v1.Orders/Create", &req, &reply); err != nil {
					errs <- err
					return
				}
				if want := "o-" + sku; !containsString(reply, want) {
					errs <- fmt.Errorf("%s answered %q", sku, reply)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func containsString(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return true
		}
	}
	return false
}

// rawClient speaks HTTP/2 to the engine frame by frame.
type rawClient struct {
	c   net.Conn
	fr  *http2.Framer
	blk []byte
	tab hpackenc.Table
}

func dialRaw(t *testing.T, addr string, settings ...http2.Setting) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := &rawClient{c: c, fr: http2.NewFramer(c, bufio.NewReader(c))}
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_, _ = io.WriteString(c, http2.ClientPreface)
	_ = r.fr.WriteSettings(settings...)
	return r
}

// create sends a Create call on stream id.
func (r *rawClient) create(t *testing.T, id uint32, sku string) {
	t.Helper()
	r.blk = r.tab.AppendField(r.blk[:0], ":method", "POST")
	r.blk = r.tab.AppendField(r.blk, ":scheme", "http")
	r.blk = r.tab.AppendField(r.blk, ":path", "/shop.v1.Orders/Create")
	r.blk = r.tab.AppendField(r.blk, "content-type", "application/grpc")
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.blk, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	msg := append([]byte{0x0a, byte(len(sku))}, sku...)
	msg = append(msg, 0x10, 1)
	framed := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	if err := r.fr.WriteData(id, true, append(framed, msg...)); err != nil {
		t.Fatal(err)
	}
}

// TestLeanHoldsToTheClientsWindow: a client that opens a window of 10
// bytes gets 10 bytes of the reply, and the rest with the trailers only
// once it opens more.
func TestLeanHoldsToTheClientsWindow(t *testing.T) {
	r := dialRaw(t, startLean(t), http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	r.create(t, 1, "windowed-order")
	var data []byte
	for len(data) < 10 {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := f.(*http2.DataFrame); ok {
			data = append(data, d.Data()...)
		}
	}
	if len(data) != 10 {
		t.Fatalf("%d bytes past a window of 10", len(data))
	}
	_ = r.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			break // nothing more until the window opens
		}
		if f.Header().StreamID == 1 {
			t.Fatalf("a frame past the window: %v", f)
		}
	}
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := r.fr.WriteWindowUpdate(1, 1000); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			data = append(data, f.Data()...)
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				if f.PseudoValue("status") != "" || f.Fields[0].Name != "grpc-status" || f.Fields[0].Value != "0" {
					t.Fatalf("trailers %v", f.Fields)
				}
				if !containsString(data, "o-windowed-order") {
					t.Fatalf("reply %q", data)
				}
				return
			}
		}
	}
}

// TestLeanRefusesBrokenFrames: a frame that breaks HTTP/2 gets GOAWAY and
// the end of its connection; the engine goes on serving others.
func TestLeanRefusesBrokenFrames(t *testing.T) {
	addr := startLean(t)
	for name, send := range map[string]func(fr *http2.Framer) error{
		"data on stream 0": func(fr *http2.Framer) error { return fr.WriteRawFrame(http2.FrameData, 0, 0, []byte("x")) },
		"even stream": func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, EndHeaders: true})
		},
		"headers not decodable": func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff}})
		},
		"frame too large":    func(fr *http2.Framer) error { return fr.WriteRawFrame(http2.FrameData, 0, 1, make([]byte, 20000)) },
		"window update of 0": func(fr *http2.Framer) error { return fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 0, make([]byte, 4)) },
	} {
		t.Run(name, func(t *testing.T) {
			r := dialRaw(t, addr)
			if err := send(r.fr); err != nil {
				t.Fatal(err)
			}
			for {
				f, err := r.fr.ReadFrame()
				if err != nil {
					t.Fatalf("the connection ended without GOAWAY: %v", err)
				}
				if g, ok := f.(*http2.GoAwayFrame); ok {
					if g.ErrCode == http2.ErrCodeNo {
						t.Fatalf("GOAWAY %v", g.ErrCode)
					}
					break
				}
			}
			if _, err := r.fr.ReadFrame(); !errors.Is(err, io.EOF) {
				t.Fatalf("after GOAWAY: %v", err)
			}
		})
	}
	cc := dialGRPC(t, addr)
	if got := call(t, cc, "/shop.v1.Orders/Get", nil, time.Second); got.code != "OK" {
		t.Fatalf("after the broken connections: %+v", got)
	}
}

// TestLeanCallAllocatesNothing: a call through a connection's frame
// handling, from its HEADERS to its answer's trailers, allocates nothing
// once the connection is warm.
func TestLeanCallAllocatesNothing(t *testing.T) {
	lc := newLeanConn(nil)
	lc.bw.Reset(io.Discard)
	var tab hpackenc.Table
	var blk []byte
	msg := []byte{0, 0, 0, 0, 9, 0x0a, 3, 'a', 'b', 'c', 0x10, 2, 0x18, 1}
	id := uint32(1)
	one := func() {
		blk = tab.AppendField(blk[:0], ":method", "POST")
		blk = tab.AppendField(blk, ":path", "/shop.v1.Orders/Create")
		if err := lc.frame(http2.FrameHeaders, http2.FlagHeadersEndHeaders, id, blk); err != nil {
			t.Fatal(err)
		}
		if err := lc.frame(http2.FrameData, http2.FlagDataEndStream, id, msg); err != nil {
			t.Fatal(err)
		}
		if len(lc.streams) != 0 {
			t.Fatal("the call was not answered")
		}
		id += 2
	}
	one()
	if n := testing.AllocsPerRun(1000, one); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
