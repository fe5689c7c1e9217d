package reactor_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/server"
	"github.com/valyala/fasthttp"
)

// TestKeepAliveAfterABody: a request body read to its last byte, however
// its reads fell, leaves its keep-alive connection idle, bounded by the
// idle timeout: a client that sends its next request on it after more
// than the header timeout is answered, by raw bytes and by fasthttp's
// pooled client alike (a fiber left waiting on the connection under the
// header timeout closed it under the client's next request).
func TestKeepAliveAfterABody(t *testing.T) {
	g, _ := gatewaytest.StartRecorded(t, gatewaytest.OneService, gatewaytest.Options{Tweak: func(o *server.Options) {
		o.Workers = 1
		o.HeaderTimeout = 300 * time.Millisecond
	}})
	for _, size := range []int{16 << 10, 300 << 10, 1<<20 + 7} {
		c, err := net.Dial("tcp", g.Addr)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		body := strings.Repeat("b", size)
		fmt.Fprintf(c, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", size, body)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d bytes: %v %v", size, resp, err)
		} else {
			resp.Body.Close()
		}
		time.Sleep(600 * time.Millisecond)
		fmt.Fprintf(c, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("the request after a body of %d bytes, past the header timeout: %v %v", size, resp, err)
		} else {
			resp.Body.Close()
		}
		c.Close()
	}

	client := &fasthttp.Client{}
	for i := range 6 {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI("http://" + g.Addr + "/c")
		req.Header.SetMethod("POST")
		req.SetBodyString(strings.Repeat("c", 300<<10))
		if err := client.DoTimeout(req, resp, 5*time.Second); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("pooled request %d: %v %d", i, err, resp.StatusCode())
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
		if i%2 == 1 {
			time.Sleep(600 * time.Millisecond)
		}
	}
}
