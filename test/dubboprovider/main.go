// Command dubboprovider is a Dubbo provider built with dubbo-go, for the
// gateway's end-to-end tests: it serves com.shop.OrderService over the
// Dubbo 2 protocol (hessian2) on a loopback port, with a POJO argument and
// result, a method that throws and a method that never answers in time.
// It lives in a module of its own so that the gateway's go.mod does not
// carry dubbo-go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"dubbo.apache.org/dubbo-go/v3"
	"dubbo.apache.org/dubbo-go/v3/common"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	_ "dubbo.apache.org/dubbo-go/v3/imports"
	"dubbo.apache.org/dubbo-go/v3/protocol"
	"dubbo.apache.org/dubbo-go/v3/server"
	hessian "github.com/apache/dubbo-go-hessian2"
	"github.com/apache/dubbo-go-hessian2/java_exception"
)

// OrderQuery is the POJO argument (com.shop.OrderQuery).
type OrderQuery struct {
	Customer string
	Items    []string
	Limit    int32
}

func (OrderQuery) JavaClassName() string { return "com.shop.OrderQuery" }

// Order is the POJO result (com.shop.Order).
type Order struct {
	Id       string
	Customer string
	Total    float64
	Items    []string
	Paid     bool
}

func (Order) JavaClassName() string { return "com.shop.Order" }

// OrderService implements com.shop.OrderService.
type OrderService struct{ hang time.Duration }

// GetOrder answers an order by id.
func (s *OrderService) GetOrder(_ context.Context, id string) (*Order, error) {
	return &Order{Id: id, Customer: "c-" + id, Total: 12.5, Items: []string{"book"}, Paid: true}, nil
}

// FindOrders answers the orders a query selects: one per item, its id
// made of the customer and the limit.
func (s *OrderService) FindOrders(_ context.Context, q *OrderQuery) (*Order, error) {
	if q == nil {
		return nil, errors.New("no query")
	}
	return &Order{Id: fmt.Sprintf("%s-%d", q.Customer, q.Limit), Customer: q.Customer,
		Total: float64(len(q.Items)) * 2.25, Items: q.Items}, nil
}

// NotFound is the exception fail throws (com.shop.NotFound).
type NotFound struct {
	SerialVersionUID     int64
	DetailMessage        string
	StackTrace           []java_exception.StackTraceElement
	SuppressedExceptions []java_exception.Throwabler
	Cause                java_exception.Throwabler
}

func (NotFound) JavaClassName() string { return "com.shop.NotFound" }
func (e NotFound) Error() string       { return e.DetailMessage }
func (e NotFound) GetStackTrace() []java_exception.StackTraceElement {
	return e.StackTrace
}

// Fail always throws com.shop.NotFound.
func (s *OrderService) Fail(_ context.Context, id string) (*Order, error) {
	return nil, &NotFound{DetailMessage: "order " + id + " not found", StackTrace: []java_exception.StackTraceElement{}}
}

// Hang answers only after the configured hang, far past any budget.
func (s *OrderService) Hang(_ context.Context, id string) (*Order, error) {
	time.Sleep(s.hang)
	return &Order{Id: id}, nil
}

// Attachment answers the value of the call's attachment key ("" when
// there is none): what the consumer sent along besides the arguments.
func (s *OrderService) Attachment(ctx context.Context, key string) (string, error) {
	all, _ := ctx.Value(constant.AttachmentKey).(map[string]any)
	switch v := all[key].(type) {
	case string:
		return v, nil
	case []string:
		return strings.Join(v, ","), nil
	}
	return "", nil
}

// MethodMapper gives the methods their Java names.
func (s *OrderService) MethodMapper() map[string]string {
	return map[string]string{"GetOrder": "getOrder", "FindOrders": "findOrders", "Fail": "fail", "Hang": "hang", "Attachment": "attachment"}
}

func main() {
	port := flag.Int("port", 20880, "loopback port to serve on")
	hang := flag.Duration("hang", time.Minute, "how long hang takes")
	triple := flag.String("triple", "", "serve shop.v1.Orders over Triple instead, from this descriptor set")
	flag.Parse()
	if *triple != "" {
		fail(serveTriple(*port, *triple))
	}
	hessian.RegisterPOJO(&OrderQuery{})
	hessian.RegisterPOJO(&Order{})
	hessian.RegisterPOJO(&NotFound{})
	ins, err := dubbo.NewInstance(dubbo.WithName("dubboprovider"),
		dubbo.WithProtocol(protocol.WithDubbo(), protocol.WithPort(*port)))
	if err != nil {
		fail(err)
	}
	srv, err := ins.NewServer()
	if err != nil {
		fail(err)
	}
	// dubbo-go 3.3.0 stores a nil *ServiceInfo as a non-nil interface
	// and then dereferences it: an empty one is what "no info" means.
	info := &common.ServiceInfo{InterfaceName: "com.shop.OrderService"}
	err = srv.Register(&OrderService{hang: *hang}, info, server.WithInterface("com.shop.OrderService"),
		server.WithVersion("1.0.0"), server.WithGroup("g1"), server.WithSerialization("hessian2"), server.WithNotRegister())
	if err != nil {
		fail(err)
	}
	if err := srv.Serve(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "dubboprovider:", err)
	os.Exit(1)
}
