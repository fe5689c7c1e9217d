package upstream_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/internal/testutil/grpcorders"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// h2cCreate calls Orders/Create through the gateway at addr as a gRPC
// client without TLS (h2c with prior knowledge, as gRPC speaks to a
// plaintext port) and returns the order's id and the call's trailer.
func h2cCreate(t *testing.T, addr, tenant, body string) (string, metadata.MD, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d, _ := grpcorders.Files(t).FindDescriptorByName("shop.v1.Orders")
	create := d.(protoreflect.ServiceDescriptor).Methods().ByName("Create")
	in, out := dynamicpb.NewMessage(create.Input()), dynamicpb.NewMessage(create.Output())
	if err := protojson.Unmarshal([]byte(body), in); err != nil {
		t.Fatal(err)
	}
	var trailer metadata.MD
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-tenant", tenant), 5*time.Second)
	defer cancel()
	err = conn.Invoke(ctx, "/shop.v1.Orders/Create", in, out, grpc.Trailer(&trailer))
	return out.Get(out.Descriptor().Fields().ByName("id")).String(), trailer, err
}

// TestGRPCPassThroughH2C: a gRPC client with insecure credentials calls
// through the cleartext port on every transport and gets the backend's
// answer, trailers and statuses; with client.h2c off its call fails at
// once (HTTP_1_1_REQUIRED) instead of waiting for a reply that never comes.
func TestGRPCPassThroughH2C(t *testing.T) {
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			be := grpcorders.Start(t)
			g := gatewaytest.Start(t, grpcPassRoutes, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": be.Addr}})
			id, trailer, err := h2cCreate(t, g.Addr, "t1", `{"sku":"abc","quantity":2}`)
			if err != nil || id != "o-abc" {
				t.Fatalf("call: %q %v", id, err)
			}
			if got := trailer.Get("x-order-trace"); len(got) != 1 || got[0] != "t-Create" {
				t.Fatalf("trailers %v", trailer)
			}
			if md := be.LastMetadata(); len(md.Get("x-tenant")) != 1 || len(md.Get("x-request-id")) != 1 {
				t.Fatalf("backend metadata %v", md)
			}
			if _, _, err := h2cCreate(t, g.Addr, "t2", `{"sku":"missing","quantity":1}`); status.Code(err) != codes.NotFound {
				t.Fatalf("NOT_FOUND passed through as %v", err)
			}
			if n := g.H2C.Stats().Conns; n > 1 {
				t.Fatalf("%d h2c connections open after two calls, each on a closed connection", n)
			}

			off := gatewaytest.Start(t, grpcPassRoutes+"client:\n  h2c: false\n", gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": be.Addr}})
			calls := be.Calls.Load()
			start := time.Now()
			_, _, err = h2cCreate(t, off.Addr, "t3", `{"sku":"abc","quantity":1}`)
			if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "HTTP_1_1_REQUIRED") || time.Since(start) > 2*time.Second {
				t.Fatalf("h2c off: %v after %v", err, time.Since(start))
			}
			if be.Calls.Load() != calls {
				t.Fatal("the call reached the backend with h2c off")
			}
			t.Logf("h2c off, the client says: %v", err)
		})
	}
}

// TestGRPCAnswerFramedByItsTrailers: a passed-through call's answer
// carries no Content-Length beside its trailers. gRPC servers send none; a
// client that trusts one (curl) stops reading at the body's end and never
// sees grpc-status. The call is made with a plain HTTP/2 client, byte for
// byte as curl would.
func TestGRPCAnswerFramedByItsTrailers(t *testing.T) {
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			be := grpcorders.Start(t)
			g := gatewaytest.Start(t, grpcPassRoutes, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": be.Addr}})
			tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}}
			defer tr.CloseIdleConnections()
			// CreateOrderRequest{sku: "abc", quantity: 2}, framed.
			call := []byte("\x00\x00\x00\x00\x07\x0a\x03abc\x10\x02")
			req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr+"/shop.v1.Orders/Create", bytes.NewReader(call))
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("TE", "trailers")
			req.Header.Set("X-Tenant", "t1")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || len(body) < 5 {
				t.Fatalf("answer %d %q %v", resp.StatusCode, body, err)
			}
			if cl := resp.Header.Get("Content-Length"); cl != "" {
				t.Fatalf("Content-Length %s beside the trailers %v", cl, resp.Trailer)
			}
			if resp.Trailer.Get("Grpc-Status") != "0" {
				t.Fatalf("trailers %v", resp.Trailer)
			}
		})
	}
}

// TestGrpcurlOnTheCleartextPort: grpcurl in plaintext (h2c with prior
// knowledge, as it reaches any plaintext gRPC port) gets its answers from
// the gateway's cleartext port, a reply and a backend's status alike, in
// far less than the 25 s it once waited for an empty reply.
func TestGrpcurlOnTheCleartextPort(t *testing.T) {
	bin := testutil.Grpcurl(t)
	be := grpcorders.Start(t)
	g := gatewaytest.Start(t, grpcPassRoutes, gatewaytest.Options{Vars: map[string]string{"UP": be.Addr}})
	pb := ordersPB(t)
	call := func(body string) (string, error) {
		out, err := exec.Command(bin, "-plaintext", "-protoset", pb, "-max-time", "5", "-d", body,
			g.Addr, "shop.v1.Orders/Create").CombinedOutput()
		return string(out), err
	}
	start := time.Now()
	if out, err := call(`{"sku":"abc","quantity":2,"customerId":"c-1"}`); err != nil || !strings.Contains(out, `"id": "o-abc"`) ||
		!strings.Contains(out, `"totalCents": "2500"`) {
		t.Fatalf("grpcurl: %v\n%s", err, out)
	}
	if out, err := call(`{"sku":"missing","quantity":1}`); err == nil || !strings.Contains(out, "NotFound") ||
		!strings.Contains(out, "no such sku") {
		t.Fatalf("grpcurl, a backend's status: %v\n%s", err, out)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("two grpcurl calls took %v", took)
	}
}
