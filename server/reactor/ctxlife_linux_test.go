//go:build linux

package reactor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server/transport"
	"github.com/valyala/fasthttp"
)

// ctxProbe checks, from inside the handler, the context the transport
// hands it: readied for this request (nothing left of the last one on
// the connection), on the fiber's loop, with the answer buffer lent; and
// /stream answers with a body whose reads check that the context is still
// this request's while the transport writes the answer.
type ctxProbe struct {
	mu       sync.Mutex
	problems []string
}

func (p *ctxProbe) fault(format string, a ...any) {
	p.mu.Lock()
	p.problems = append(p.problems, fmt.Sprintf(format, a...))
	p.mu.Unlock()
}

func (p *ctxProbe) Serve(c *pipeline.Ctx) bool {
	path := string(c.Req.URI().Path())
	switch {
	case c.RouteName != "":
		p.fault("%s: the context still holds %q from an earlier request", path, c.RouteName)
	case c.Loop == nil:
		p.fault("%s: no loop", path)
	case c.Answer == nil:
		p.fault("%s: no answer buffer lent", path)
	case c.Peer.Port() == 0:
		p.fault("%s: no peer", path)
	}
	c.RouteName = path
	if path == "/stream" {
		c.Resp.SetBodyStream(&whileWritten{p: p, c: c, left: strings.Repeat("s", 64<<10)}, -1)
		return false
	}
	c.Resp.SetBodyString("path " + path)
	return false
}

func (p *ctxProbe) ServeError(err error, c *pipeline.Ctx) {
	if c.Req == nil || c.Loop != nil || c.RouteName != "" {
		p.fault("error: context Req %v, Loop %v, route %q", c.Req != nil, c.Loop, c.RouteName)
	}
	c.Resp.SetStatusCode(fasthttp.StatusBadRequest)
}

// whileWritten is a streamed answer that looks at its request's context
// each time the transport reads more of it to write.
type whileWritten struct {
	p    *ctxProbe
	c    *pipeline.Ctx
	left string
}

func (w *whileWritten) Read(b []byte) (int, error) {
	if w.c.Req == nil || w.c.RouteName != "/stream" {
		w.p.fault("/stream: the context was released (route %q) before its answer was written", w.c.RouteName)
	}
	if w.left == "" {
		return 0, io.EOF
	}
	n := copy(b, w.left)
	w.left = w.left[n:]
	return n, nil
}

// TestTransportOwnsTheCtx: the reactor readies each request's context,
// keeps it through the answer's writing, and releases it before the next
// request on the connection, pipelined or not; a request it cannot read
// is answered in a context of its own without a loop.
func TestTransportOwnsTheCtx(t *testing.T) {
	p := &ctxProbe{}
	tr, err := New(p, transport.Options{Workers: 1, HeaderTimeout: 2 * time.Second,
		IdleTimeout: 5 * time.Second, WriteTimeout: 2 * time.Second, StreamBodyBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
		<-done
	})

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	// One at a time, then pipelined, with a streamed answer among them.
	for _, batch := range [][]string{{"/a"}, {"/stream"}, {"/b"}, {"/c", "/stream", "/d"}} {
		var req strings.Builder
		for _, path := range batch {
			req.WriteString("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")
		}
		if _, err := conn.Write([]byte(req.String())); err != nil {
			t.Fatal(err)
		}
		for _, path := range batch {
			var resp fasthttp.Response
			if err := resp.Read(br); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			want := "path " + path
			if path == "/stream" {
				want = strings.Repeat("s", 64<<10)
			}
			if string(resp.Body()) != want {
				t.Fatalf("%s: answer of %d bytes, want %d", path, len(resp.Body()), len(want))
			}
		}
	}
	// A header section it refuses (ending in a bare LF).
	if _, err := conn.Write([]byte("GET /e HTTP/1.1\r\nHost: x\n\n")); err != nil {
		t.Fatal(err)
	}
	var resp fasthttp.Response
	if err := resp.Read(br); err != nil || resp.StatusCode() != fasthttp.StatusBadRequest {
		t.Fatalf("malformed request: %v, status %d", err, resp.StatusCode())
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.problems) > 0 {
		t.Fatal(strings.Join(p.problems, "\n"))
	}
}
