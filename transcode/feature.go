// Package transcode is the route step "grpc": HTTP/JSON in, a unary gRPC
// call to the route's service, JSON out. The request message is built
// from the JSON body, the path's variables and the query, following the
// method's google.api.http annotation when it has one; the reply comes back
// as the JSON of its message. The conversion reads and writes protobuf's
// wire format directly, following plans built from a descriptor set when
// the configuration loads (no code generated per service, no messages
// built per call); it accepts and writes the JSON protojson does, which
// the tests hold it to.
//
// The step runs after every other: signature, limits, WAF and recording
// see the JSON the client sent and the JSON it gets.
package transcode

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/upstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Config is a route's grpc setting.
type Config struct {
	// Service and Method name the call: shop.v1.Orders, Create.
	Service string `yaml:"service"`
	Method  string `yaml:"method"`
	// Descriptors is a FileDescriptorSet holding the service and what it
	// imports (protoc --include_imports --descriptor_set_out).
	Descriptors string `yaml:"descriptors"`
	// ProtoNames writes the answer's fields under their proto names
	// (customer_id) instead of JSON's lowerCamelCase (customerId); input
	// takes both either way.
	ProtoNames bool `yaml:"proto_names"`
	// EmitDefaults writes fields that hold their zero value.
	EmitDefaults bool `yaml:"emit_defaults"`
}

// Key is the route setting.
const Key = "grpc"

func init() {
	pipeline.Register(pipeline.Feature{
		Key:    Key,
		Stage:  pipeline.StageTranscode,
		Scope:  pipeline.ScopeRoute,
		Config: func() any { return new(Config) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			if !b.Route.Forwards {
				return nil, errors.New("grpc needs a service to call")
			}
			// It calls one gRPC service. (A route to a gRPC service
			// without it passes gRPC clients' calls through.)
			if b.Route.Service == "" {
				return nil, errors.New("grpc needs service: a gRPC service to call (not split, mock or offline)")
			}
			services, _ := upstream.ServicesKey.Get(b.Env)
			if svc := services[b.Route.Service]; svc != nil && !svc.GRPC() {
				return nil, fmt.Errorf("grpc: service %q speaks HTTP; set protocol: grpc on it", b.Route.Service)
			}
			return New(cfg.(*Config))
		},
	})
}

// New builds the step: the method is looked up in the descriptor set and
// must be unary.
func New(cfg *Config) (*Step, error) {
	if cfg.Service == "" || cfg.Method == "" || cfg.Descriptors == "" {
		return nil, errors.New("grpc needs service, method and descriptors")
	}
	files, err := LoadDescriptors(cfg.Descriptors)
	if err != nil {
		return nil, err
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(cfg.Service))
	if err != nil {
		return nil, fmt.Errorf("descriptors %s: no service %s", cfg.Descriptors, cfg.Service)
	}
	svc, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("descriptors %s: %s is not a service", cfg.Descriptors, cfg.Service)
	}
	m := svc.Methods().ByName(protoreflect.Name(cfg.Method))
	if m == nil {
		var names []string
		for i := range svc.Methods().Len() {
			names = append(names, string(svc.Methods().Get(i).Name()))
		}
		return nil, fmt.Errorf("service %s has no method %s (it has %s)", cfg.Service, cfg.Method, strings.Join(names, ", "))
	}
	if m.IsStreamingClient() || m.IsStreamingServer() {
		return nil, fmt.Errorf("method %s.%s streams; only unary methods are transcoded", cfg.Service, cfg.Method)
	}
	return newStep(cfg, m)
}

// LoadDescriptors reads a FileDescriptorSet file into a registry of its
// own (not the process's global one).
func LoadDescriptors(path string) (*protoregistry.Files, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("descriptors: %w", err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("descriptors %s: not a FileDescriptorSet: %v", path, err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("descriptors %s: %v (was it built with --include_imports?)", path, err)
	}
	return files, nil
}
