package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"dubbo.apache.org/dubbo-go/v3"
	"dubbo.apache.org/dubbo-go/v3/common"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	"dubbo.apache.org/dubbo-go/v3/protocol"
	"dubbo.apache.org/dubbo-go/v3/protocol/triple/triple_protocol"
	"dubbo.apache.org/dubbo-go/v3/server"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// serveTriple serves shop.v1.Orders/Create (from the descriptor set at
// descriptors) over Dubbo 3's Triple protocol on port: the order service
// of the gateway's gRPC tests, as a Dubbo provider. Messages are dynamic,
// so no code is generated.
func serveTriple(port int, descriptors string) error {
	raw, err := os.ReadFile(descriptors)
	if err != nil {
		return err
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		return err
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return err
	}
	find := func(name string) (protoreflect.MessageDescriptor, error) {
		d, err := files.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			return nil, err
		}
		return d.(protoreflect.MessageDescriptor), nil
	}
	in, err := find("shop.v1.CreateOrderRequest")
	if err != nil {
		return err
	}
	out, err := find("shop.v1.Order")
	if err != nil {
		return err
	}
	create := func(_ context.Context, args []any, _ any) (any, error) {
		req := args[0].(*dynamicpb.Message)
		get := func(name string) protoreflect.Value { return req.Get(in.Fields().ByName(protoreflect.Name(name))) }
		sku, qty := get("sku").String(), get("quantity").Int()
		if sku == "missing" {
			return nil, triple_protocol.NewError(triple_protocol.CodeNotFound, errors.New("no such sku"))
		}
		o := dynamicpb.NewMessage(out)
		set := func(name string, v protoreflect.Value) { o.Set(out.Fields().ByName(protoreflect.Name(name)), v) }
		set("id", protoreflect.ValueOfString("o-"+sku))
		set("sku", protoreflect.ValueOfString(sku))
		set("quantity", protoreflect.ValueOfInt32(int32(qty)))
		set("customer_id", get("customer_id"))
		set("total_cents", protoreflect.ValueOfInt64(qty*1250))
		return triple_protocol.NewResponse(o), nil
	}
	info := &common.ServiceInfo{
		InterfaceName: "shop.v1.Orders",
		ServiceType:   (*OrderService)(nil),
		Methods: []common.MethodInfo{{
			Name: "Create", Type: constant.CallUnary,
			ReqInitFunc: func() any { return dynamicpb.NewMessage(in) },
			MethodFunc:  create,
		}},
	}
	ins, err := dubbo.NewInstance(dubbo.WithName("tripleprovider"),
		dubbo.WithProtocol(protocol.WithTriple(), protocol.WithPort(port)))
	if err != nil {
		return err
	}
	srv, err := ins.NewServer()
	if err != nil {
		return err
	}
	if err := srv.Register(&OrderService{}, info, server.WithInterface("shop.v1.Orders"), server.WithNotRegister()); err != nil {
		return fmt.Errorf("registering shop.v1.Orders: %w", err)
	}
	return srv.Serve()
}
