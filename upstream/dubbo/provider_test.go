package dubbo

import (
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

func orderTarget(t *testing.T, method string, types ...string) *Target {
	t.Helper()
	params := make([]Param, len(types))
	for i, typ := range types {
		p, err := NewParam(typ)
		if err != nil {
			t.Fatal(err)
		}
		params[i] = p
	}
	tg, err := NewTarget("com.shop.OrderService", "1.0.0", "g1", method, params)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func invoke(t *testing.T, in *Instance, tg *Target, budget time.Duration, args ...string) (*Call, error) {
	t.Helper()
	var c Call
	c.Begin(tg)
	for i, a := range args {
		var err error
		if c.Frame, err = tg.Params[i].AppendJSON(c.Frame, []byte(a)); err != nil {
			t.Fatal(err)
		}
	}
	c.Attachments(tg)
	c.Attach("consumer", "tests")
	return &c, in.Invoke(&c, time.Now().Add(budget))
}

// Calls to a real dubbo-go provider: a POJO result, a POJO argument, an
// exception, a timeout, many calls at once on one connection, and the
// provider's death.
func TestProvider(t *testing.T) {
	p := testutil.StartDubboProvider(t, 5*time.Second)
	in := NewInstance(p.Addr, Settings{MaxInFlight: 64})
	defer in.Close(0)

	// The health probe's heartbeat, answered by the provider.
	if err := in.Ping(5 * time.Second); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	c, err := invoke(t, in, orderTarget(t, "getOrder", "java.lang.String"), 5*time.Second, `"o-7"`)
	if err != nil {
		t.Fatal(err)
	}
	var order map[string]any
	if err := json.Unmarshal(c.Result, &order); err != nil {
		t.Fatalf("%s: %v", c.Result, err)
	}
	if order["id"] != "o-7" {
		t.Fatalf("getOrder answered %s", c.Result)
	}
	t.Logf("getOrder: %s", c.Result)

	c, err = invoke(t, in, orderTarget(t, "findOrders", "com.shop.OrderQuery"), 5*time.Second,
		`{"customer":"ann","items":["a","b","c"],"limit":4}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(c.Result, &order); err != nil || order["total"] != 6.75 {
		t.Fatalf("findOrders answered %s (%v)", c.Result, err)
	}
	t.Logf("findOrders: %s", c.Result)

	c, err = invoke(t, in, orderTarget(t, "fail", "java.lang.String"), 5*time.Second, `"o-9"`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Exception != "com.shop.NotFound" || c.Message != "order o-9 not found" {
		t.Fatalf("fail answered %q %q %s", c.Exception, c.Message, c.Result)
	}
	t.Logf("fail: %s: %s", c.Exception, c.Message)

	began := time.Now()
	_, err = invoke(t, in, orderTarget(t, "hang", "java.lang.String"), 300*time.Millisecond, `"o-1"`)
	var te TimeoutError
	if !errors.As(err, &te) || time.Since(began) > time.Second {
		t.Fatalf("hang: %v after %v", err, time.Since(began))
	}

	// Concurrent calls share the connection, each matched to its answer.
	var wg sync.WaitGroup
	tg := orderTarget(t, "getOrder", "java.lang.String")
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := `"c-` + string(rune('a'+i%26)) + `"`
			c, err := invoke(t, in, tg, 5*time.Second, id)
			if err != nil {
				t.Error(err)
				return
			}
			var o map[string]any
			_ = json.Unmarshal(c.Result, &o)
			if got, _ := json.Marshal(o["customer"]); string(got) != `"c-`+id[1:] {
				t.Errorf("asked %s, answered %s", id, c.Result)
			}
		}()
	}
	wg.Wait()

	p.Kill()
	_, err = invoke(t, in, tg, time.Second, `"o-1"`)
	if err == nil {
		t.Fatal("a call to a killed provider succeeded")
	}
	_, err = invoke(t, in, tg, time.Second, `"o-1"`)
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("after the provider died: %v, want a refused dial", err)
	}
}
