// Package grpcorders is a gRPC order service for tests, defined in
// proto/orders.proto and served from its descriptor set (orders.pb,
// checked in; `make proto` rebuilds it with protoc) through dynamicpb, so
// no generated code is needed.
//
// Behaviour by request: Create answers an order with id "o-<sku>"; a sku
// of "missing" fails NOT_FOUND, "boom" INTERNAL, "busy" UNAVAILABLE,
// "hang" waits until the call is cancelled, "slow" answers after 300 ms; a quantity below 1 fails
// INVALID_ARGUMENT. Get answers the order named by id. Every call's
// trailers carry x-order-trace: t-<method>.
package grpcorders

import (
	"context"
	_ "embed"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// DescriptorSet is orders.pb: shop.v1 and its imports.
//
//go:embed orders.pb
var DescriptorSet []byte

// Server is a running order service.
type Server struct {
	Addr  string
	Calls atomic.Int64
	srv   *grpc.Server

	mu   sync.Mutex
	last metadata.MD
}

// LastMetadata returns the metadata of the last call.
func (s *Server) LastMetadata() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Stop ends the server at once (connections closed).
func (s *Server) Stop() { s.srv.Stop() }

// Start serves the order service on a loopback port until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := StartOn(t, ln)
	t.Cleanup(s.Stop)
	return s
}

// StartOn serves on ln; the caller stops it.
func StartOn(t testing.TB, ln net.Listener) *Server {
	t.Helper()
	s, err := Serve(ln)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// StartTLS serves over TLS with the certificate in certFile and keyFile
// until the test ends.
func StartTLS(t testing.TB, certFile, keyFile string) *Server {
	t.Helper()
	creds, err := credentials.NewServerTLSFromFile(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Serve(ln, grpc.Creds(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Serve serves the order service on ln until Stop (the bench's gRPC
// upstream runs it too).
func Serve(ln net.Listener, opts ...grpc.ServerOption) (*Server, error) {
	files, err := files()
	if err != nil {
		return nil, err
	}
	d, err := files.FindDescriptorByName("shop.v1.Orders")
	if err != nil {
		return nil, err
	}
	svc := d.(protoreflect.ServiceDescriptor)
	s := &Server{Addr: ln.Addr().String(), srv: grpc.NewServer(opts...)}
	desc := grpc.ServiceDesc{ServiceName: string(svc.FullName()), HandlerType: (*any)(nil)}
	for _, name := range []string{"Create", "Get"} {
		m := svc.Methods().ByName(protoreflect.Name(name))
		desc.Methods = append(desc.Methods, grpc.MethodDesc{
			MethodName: name,
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := dynamicpb.NewMessage(m.Input())
				if err := dec(in); err != nil {
					return nil, err
				}
				s.Calls.Add(1)
				md, _ := metadata.FromIncomingContext(ctx)
				s.mu.Lock()
				s.last = md
				s.mu.Unlock()
				_ = grpc.SetTrailer(ctx, metadata.Pairs("x-order-trace", "t-"+name))
				return s.answer(ctx, name, in, dynamicpb.NewMessage(m.Output()))
			},
		})
	}
	s.srv.RegisterService(&desc, struct{}{})
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *Server) answer(ctx context.Context, method string, in, out *dynamicpb.Message) (any, error) {
	get := func(m *dynamicpb.Message, f string) protoreflect.Value {
		return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(f)))
	}
	set := func(f string, v protoreflect.Value) {
		out.Set(out.Descriptor().Fields().ByName(protoreflect.Name(f)), v)
	}
	if method == "Get" {
		id := get(in, "id").String()
		if id == "missing" {
			return nil, status.Error(codes.NotFound, "no order "+id)
		}
		set("id", protoreflect.ValueOfString(id))
		set("status", protoreflect.ValueOfString("shipped"))
		if get(in, "with_items").Bool() {
			set("quantity", protoreflect.ValueOfInt32(get(in, "limit").Interface().(int32)))
		}
		return out, nil
	}
	sku := get(in, "sku").String()
	switch sku {
	case "missing":
		return nil, status.Error(codes.NotFound, "no such sku")
	case "boom":
		return nil, status.Error(codes.Internal, "inventory exploded")
	case "busy":
		return nil, status.Error(codes.Unavailable, "try later")
	case "hang":
		<-ctx.Done()
		return nil, ctx.Err()
	case "slow":
		time.Sleep(300 * time.Millisecond)
	}
	qty := get(in, "quantity").Interface().(int32)
	if qty < 1 {
		return nil, status.Error(codes.InvalidArgument, "quantity must be at least 1")
	}
	set("id", protoreflect.ValueOfString("o-"+sku))
	set("sku", protoreflect.ValueOfString(sku))
	set("quantity", protoreflect.ValueOfInt32(qty))
	set("customer_id", get(in, "customer_id"))
	set("status", protoreflect.ValueOfString("created"))
	set("total_cents", protoreflect.ValueOfInt64(int64(qty)*1250))
	notes := out.Mutable(out.Descriptor().Fields().ByName("notes")).Map()
	get(in, "notes").Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		notes.Set(k, protoreflect.ValueOfString(strings.ToUpper(v.String())))
		return true
	})
	tags := out.Mutable(out.Descriptor().Fields().ByName("tags")).List()
	l := get(in, "tags").List()
	for i := range l.Len() {
		tags.Append(l.Get(i))
	}
	return out, nil
}

// Files is the descriptor set as a registry.
func Files(t testing.TB) *protoregistry.Files {
	t.Helper()
	f, err := files()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func files() (*protoregistry.Files, error) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(DescriptorSet, &set); err != nil {
		return nil, err
	}
	return protodesc.NewFiles(&set)
}
