//go:build linux

package reactor

import (
	"bytes"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/tollgate/tollgate/internal/testutil"
)

func TestSockSendRecv(t *testing.T) {
	a, b := testutil.LoopbackFDs(t)
	msg := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if n, err := sockSend(a, msg); err != nil || n != len(msg) {
		t.Fatalf("send: %d, %v", n, err)
	}
	buf := make([]byte, 64)
	var got []byte
	for len(got) < len(msg) {
		n, err := sockRecv(b, buf)
		if err == syscall.EAGAIN {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("recv: %d, %v", n, err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("recv %q, want %q", got, msg)
	}
	if _, err := sockRecv(b, buf); err != syscall.EAGAIN {
		t.Fatalf("recv on an empty socket: %v, want EAGAIN", err)
	}
	// A send to a peer that has gone must fail with EPIPE or ECONNRESET
	// and raise no SIGPIPE. The runtime drops a SIGPIPE for a socket
	// unless it is asked for, so the test asks.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	syscall.Close(int(b))
	var err error
	for range 100 {
		if _, err = sockSend(a, msg); err != nil {
			break
		}
	}
	if err != syscall.EPIPE && err != syscall.ECONNRESET {
		t.Fatalf("send to a closed peer: %v, want EPIPE or ECONNRESET", err)
	}
	if _, err = sockSend(a, msg); err != syscall.EPIPE {
		t.Fatalf("send after the reset: %v, want EPIPE", err)
	}
	select {
	case <-pipe:
		t.Fatal("a send to a closed peer raised SIGPIPE")
	case <-time.After(100 * time.Millisecond):
	}
}

// BenchmarkSocketCalls is one loopback write and the read that takes it,
// through the socket calls the loops use and through read(2)/write(2),
// which pass the file layer first.
func BenchmarkSocketCalls(b *testing.B) {
	msg := bytes.Repeat([]byte("x"), 200)
	buf := make([]byte, 4096)
	b.Run("send-recv", func(b *testing.B) {
		w, r := testutil.LoopbackFDs(b)
		for b.Loop() {
			if _, err := sockSend(w, msg); err != nil {
				b.Fatal(err)
			}
			if _, err := sockRecv(r, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write-read", func(b *testing.B) {
		w, r := testutil.LoopbackFDs(b)
		for b.Loop() {
			if _, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(w), uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg))); e != 0 {
				b.Fatal(e)
			}
			if _, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(r), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf))); e != 0 {
				b.Fatal(e)
			}
		}
	})
}
