//go:build unix

package testutil

import (
	"net"
	"syscall"
	"testing"
)

// LoopbackFDs is a connected TCP pair on loopback as two non-blocking
// descriptors the test owns (closed when it ends), for tests of raw
// socket calls.
func LoopbackFDs(tb testing.TB) (a, b int32) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	fd := func(conn net.Conn) int32 {
		f, err := conn.(*net.TCPConn).File()
		if err != nil {
			tb.Fatal(err)
		}
		_ = conn.Close()
		tb.Cleanup(func() { _ = f.Close() })
		fd := int(f.Fd()) // Fd makes the descriptor blocking; once, then back
		if err := syscall.SetNonblock(fd, true); err != nil {
			tb.Fatal(err)
		}
		return int32(fd)
	}
	return fd(c), fd(s)
}
