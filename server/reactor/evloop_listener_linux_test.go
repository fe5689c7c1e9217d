//go:build linux

package reactor_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/server/reactor"
)

// TestEventLoopListenerLeavesRuntimePoller: the loops accept from a
// descriptor of their own and the net.Listener is closed, so the listening
// socket is in the loops' epoll sets only. Left in the runtime's poller
// too, every new connection woke the thread waiting there for nothing
// (bench/RESULTS.md, "The listener out of the runtime's poller").
func TestEventLoopListenerLeavesRuntimePoller(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ino := socketInode(t, ln.(*net.TCPListener))
	o := npOptions()
	o.Workers = 2
	tr, err := reactor.New(&loopStub{}, o)
	if err != nil {
		t.Fatal(err)
	}
	addr := gatewaytest.ServeOn(t, tr, ln)
	conn := gatewaytest.Dial(t, addr)
	gatewaytest.Write(t, conn, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, bufio.NewReader(conn), false), 200, "ok /first")

	if got := epollWatchers(t, ino); got != o.Workers {
		t.Fatalf("the listening socket is in %d epoll sets, want %d (one per loop, none for the runtime's poller)", got, o.Workers)
	}
	// Still accepting, from the loops' own descriptor.
	for i := range 8 {
		c := gatewaytest.Dial(t, addr)
		gatewaytest.Write(t, c, fmt.Sprintf("GET /n%d HTTP/1.1\r\nHost: x\r\n\r\n", i))
		gatewaytest.Check(t, gatewaytest.ReadAnswer(t, c, bufio.NewReader(c), false), 200, fmt.Sprintf("ok /n%d", i))
	}
}

// socketInode is the inode number of ln's socket.
func socketInode(t *testing.T, ln *net.TCPListener) uint64 {
	t.Helper()
	rc, err := ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var link string
	if err := rc.Control(func(fd uintptr) {
		link, err = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	}); err != nil {
		t.Fatal(err)
	}
	var ino uint64
	if _, err := fmt.Sscanf(link, "socket:[%d]", &ino); err != nil {
		t.Fatalf("fd link %q: %v", link, err)
	}
	return ino
}

// epollWatchers counts this process's epoll instances that watch the
// socket with inode ino (their /proc fdinfo lists each watched file's
// inode in hex).
func epollWatchers(t *testing.T, ino uint64) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range fds {
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || link != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if !strings.HasPrefix(line, "tfd:") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if h, ok := strings.CutPrefix(f, "ino:"); ok {
					if v, err := strconv.ParseUint(h, 16, 64); err == nil && v == ino {
						n++
					}
				}
			}
		}
	}
	return n
}
