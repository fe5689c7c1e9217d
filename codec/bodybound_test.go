package codec

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// deadlineConn brings a real socket's read deadline forward, as a
// transport's connection does.
type deadlineConn struct {
	net.Conn
	limited []time.Time
}

func (c *deadlineConn) LimitReads(t time.Time) {
	c.limited = append(c.limited, t)
	_ = c.Conn.SetReadDeadline(t)
}

// TestBodyReadBefore: a streamed body given a deadline passes on what
// comes before it and fails with ErrBodyTimeout after it, whether the
// client trickles (bytes that come late are not passed on) or sends
// nothing (the connection's read deadline, brought forward, ends the
// wait); a later deadline does not undo a sooner one.
func TestBodyReadBefore(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		client, server := net.Pipe()
		conn := &deadlineConn{Conn: server}
		var b Body
		br := bufio.NewReader(conn)
		if chunked {
			b.StartChunked(br, 0, 1024)
		} else {
			b.StartFixed(br, 1<<20)
		}
		b.LimitedBy(conn)
		deadline := time.Now().Add(300 * time.Millisecond)
		b.ReadBefore(deadline)
		b.ReadBefore(deadline.Add(time.Hour))
		if len(conn.limited) != 1 || !conn.limited[0].Equal(deadline) {
			t.Fatalf("connection limited to %v, want once to %v", conn.limited, deadline)
		}
		go func(client net.Conn) {
			// 10 bytes at once, then a byte every 100 ms past the deadline.
			if chunked {
				_, _ = io.WriteString(client, "a\r\n0123456789\r\n100\r\n")
			} else {
				_, _ = io.WriteString(client, "0123456789")
			}
			for range 5 {
				time.Sleep(100 * time.Millisecond)
				if _, err := io.WriteString(client, "x"); err != nil {
					return
				}
			}
		}(client)
		buf := make([]byte, 64)
		got := 0
		var err error
		for err == nil {
			var n int
			n, err = b.Read(buf)
			got += n
		}
		if !errors.Is(err, ErrBodyTimeout) || time.Now().Before(deadline) || time.Since(deadline) > 150*time.Millisecond {
			t.Errorf("chunked=%v: %v at %v past the deadline, want ErrBodyTimeout at it", chunked, err, time.Since(deadline))
		}
		if got < 10 || got > 13 {
			t.Errorf("chunked=%v: %d bytes passed on, want the 10 sent at once and the 2 or 3 before the deadline", chunked, got)
		}
		if _, err := b.Read(buf); !errors.Is(err, ErrBodyTimeout) {
			t.Errorf("chunked=%v: then %v", chunked, err)
		}
		client.Close()

		// Nothing at all: the read deadline ends the wait.
		client, server = net.Pipe()
		conn = &deadlineConn{Conn: server}
		b.StartFixed(bufio.NewReader(conn), 100)
		b.LimitedBy(conn)
		deadline = time.Now().Add(200 * time.Millisecond)
		b.ReadBefore(deadline)
		_, err = b.Read(buf)
		if !errors.Is(err, ErrBodyTimeout) || time.Since(deadline) > 150*time.Millisecond {
			t.Errorf("stalled: %v at %v past the deadline", err, time.Since(deadline))
		}
		client.Close()
	}
}
