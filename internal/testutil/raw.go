package testutil

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// RawResult is what a raw exchange got back.
type RawResult struct {
	Responses []*fasthttp.Response
	// Closed reports that the server closed the connection after the
	// responses (read returned EOF or reset before the deadline).
	Closed bool
}

// RawExchange writes raw to addr and reads responses until the server
// closes the connection, want responses arrived, or wait passes.
func RawExchange(t testing.TB, addr string, raw []byte, want int, wait time.Duration) RawResult {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(raw); err != nil {
		t.Fatal(err)
	}
	return ReadResponses(t, conn, want, wait)
}

// ReadResponses reads up to want responses from conn, then waits briefly to
// see whether the server closes.
func ReadResponses(t testing.TB, conn net.Conn, want int, wait time.Duration) RawResult {
	t.Helper()
	var res RawResult
	deadline := time.Now().Add(wait)
	_ = conn.SetReadDeadline(deadline)
	br := bufio.NewReader(conn)
	for len(res.Responses) < want {
		resp := &fasthttp.Response{}
		if err := resp.Read(br); err != nil {
			res.Closed = isClosed(err)
			return res
		}
		res.Responses = append(res.Responses, resp)
		if resp.ConnectionClose() {
			break
		}
	}
	// After the expected answers, look for the close.
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err := br.ReadByte()
	res.Closed = err != nil && isClosed(err)
	return res
}

func isClosed(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// Statuses are the answers' status codes, in order.
func (r RawResult) Statuses() []int {
	var out []int
	for _, x := range r.Responses {
		out = append(out, x.StatusCode())
	}
	return out
}
