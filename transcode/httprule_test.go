package transcode

import (
	"testing"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// TestHTTPRuleReadAsAKnownExtension: when a linked-in package registers
// google/api/annotations.proto (etcd's client does), a method's
// google.api.http option is a known extension, not an unknown field; the
// rule reads the same.
func TestHTTPRuleReadAsAKnownExtension(t *testing.T) {
	opts := &descriptorpb.MethodOptions{}
	proto.SetExtension(opts, annotations.E_Http, &annotations.HttpRule{
		Pattern: &annotations.HttpRule_Get{Get: "/v1/orders/{id}"}, ResponseBody: "order"})
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("orders.proto"),
		Package: proto.String("t"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Req"), Field: []*descriptorpb.FieldDescriptorProto{{
			Name: proto.String("id"), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String("id")}}}},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("Orders"), Method: []*descriptorpb.MethodDescriptorProto{{
			Name: proto.String("Get"), InputType: proto.String(".t.Req"), OutputType: proto.String(".t.Req"), Options: opts}}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, ok, err := readHTTPRule(fd.Services().Get(0).Methods().Get(0))
	if err != nil || !ok || r.Method != "GET" || r.ResponseBody != "order" || r.Path == nil {
		t.Fatalf("rule %+v, %v, %v", r, ok, err)
	}
}
