package testutil

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// RawRequest is one request exactly as a RecordingUpstream read it off the wire.
type RawRequest struct {
	Head string // request line and header section, each line ending in CRLF, without the blank line
	Body []byte // the body, de-chunked
}

// Line returns the request line.
func (r RawRequest) Line() string {
	line, _, _ := strings.Cut(r.Head, "\r\n")
	return line
}

// Fields returns the header lines in order, as sent.
func (r RawRequest) Fields() []string {
	_, rest, _ := strings.Cut(r.Head, "\r\n")
	if rest == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(rest, "\r\n"), "\r\n")
}

// Values returns the values of every field named name (ASCII case
// folded), in order.
func (r RawRequest) Values(name string) []string {
	var out []string
	for _, f := range r.Fields() {
		k, v, _ := strings.Cut(f, ":")
		if strings.EqualFold(k, name) {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// RecordingUpstream is a loopback HTTP/1.1 server that records the bytes of each
// request it receives, so tests can assert exactly what the gateway
// forwarded. It answers every request 200 "ok", or as SetAnswer says.
type RecordingUpstream struct {
	Addr   string
	ln     net.Listener
	mu     sync.Mutex
	reqs   []RawRequest
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	answer func(RawRequest) ScriptedAnswer
	// Conns counts the connections accepted.
	Conns atomic.Int64
}

// ScriptedAnswer is what a RecordingUpstream sends for one request,
// written as it is (a backend's mistakes included).
type ScriptedAnswer struct {
	Raw string
	// Later is written Pause after Raw, before the next request is read:
	// bytes no request asked for.
	Later string
	Pause time.Duration
	// Close closes the connection after them.
	Close bool
	// Early writes Raw as soon as the header section is read, before the
	// body (which is read and recorded after it): a backend refusing an
	// upload it has not taken.
	Early bool
}

// SetAnswer makes the upstream answer each request as f says; f sees the
// request line and header section (Head), not the body.
func (u *RecordingUpstream) SetAnswer(f func(RawRequest) ScriptedAnswer) {
	u.mu.Lock()
	u.answer = f
	u.mu.Unlock()
}

// StartRecordingUpstream starts a RecordingUpstream, closed when the test ends.
func StartRecordingUpstream(t testing.TB) *RecordingUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &RecordingUpstream{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	u.wg.Add(1)
	go u.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		u.mu.Lock()
		for c := range u.conns {
			_ = c.Close() // pooled keep-alive connections of the client
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

func (u *RecordingUpstream) accept() {
	defer u.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := u.ln.Accept()
		if err != nil {
			return
		}
		u.mu.Lock()
		u.conns[c] = struct{}{}
		u.Conns.Add(1)
		u.mu.Unlock()
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer func() {
				u.mu.Lock()
				delete(u.conns, c)
				u.mu.Unlock()
				_ = c.Close()
			}()
			u.serve(c)
		}()
	}
}

func (u *RecordingUpstream) serve(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var head bytes.Buffer
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
			head.WriteString(line)
		}
		req := RawRequest{Head: head.String()}
		u.mu.Lock()
		answer := u.answer
		u.mu.Unlock()
		a := ScriptedAnswer{Raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"}
		if answer != nil {
			a = answer(req)
		}
		if a.Early {
			if _, err := io.WriteString(c, a.Raw); err != nil {
				return
			}
		}
		body, ok := readBody(br, req)
		if !ok {
			return
		}
		req.Body = body
		u.mu.Lock()
		u.reqs = append(u.reqs, req)
		u.mu.Unlock()
		if !a.Early {
			if _, err := io.WriteString(c, a.Raw); err != nil {
				return
			}
		}
		if a.Later != "" {
			time.Sleep(a.Pause)
			if _, err := io.WriteString(c, a.Later); err != nil {
				return
			}
		}
		if a.Close {
			return
		}
	}
}

func readBody(br *bufio.Reader, req RawRequest) ([]byte, bool) {
	if te := req.Values("Transfer-Encoding"); len(te) > 0 {
		var body []byte
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return nil, false
			}
			n, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(line, ";", 2)[0]), 16, 64)
			if err != nil {
				return nil, false
			}
			if n == 0 {
				for { // trailer section
					l, err := br.ReadString('\n')
					if err != nil {
						return nil, false
					}
					if l == "\r\n" {
						return body, true
					}
				}
			}
			chunk := make([]byte, n+2)
			if _, err := io.ReadFull(br, chunk); err != nil {
				return nil, false
			}
			body = append(body, chunk[:n]...)
		}
	}
	cl := req.Values("Content-Length")
	if len(cl) == 0 {
		return nil, true
	}
	n, err := strconv.Atoi(cl[0])
	if err != nil || n < 0 {
		return nil, false
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, false
	}
	return body, true
}

// Requests returns a copy of what was received so far.
func (u *RecordingUpstream) Requests() []RawRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]RawRequest(nil), u.reqs...)
}

// Last returns the last request received, and false when there is none.
func (u *RecordingUpstream) Last() (RawRequest, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		return RawRequest{}, false
	}
	return u.reqs[len(u.reqs)-1], true
}

// Open reports the connections accepted and not yet closed (by either
// side: a read fails once the client closes).
func (u *RecordingUpstream) Open() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.conns)
}

// Count reports how many requests arrived.
func (u *RecordingUpstream) Count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}
