//go:build linux

package uring

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"unsafe"

	"github.com/tollgate/tollgate/internal/testutil"
)

// newRing is a ring for a test, which is skipped where the kernel refuses
// one (then the transports make their calls one by one).
func newRing(t *testing.T, entries uint32) *Ring {
	t.Helper()
	r, err := New(entries)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no io_uring here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

type result struct {
	tag uint64
	res int32
}

func submit(t *testing.T, r *Ring) []result {
	t.Helper()
	var out []result
	if err := r.Submit(func(tag uint64, res int32) { out = append(out, result{tag, res}) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSendsAndReceivesInOneSubmit(t *testing.T) {
	r := newRing(t, 16)
	const pairs = 4
	var a, b [pairs]int32
	for i := range pairs {
		a[i], b[i] = testutil.LoopbackFDs(t)
	}
	msgs := [pairs][]byte{[]byte("one"), []byte("two two"), []byte("three"), bytes.Repeat([]byte("x"), 5000)}
	for i := range pairs {
		r.Queue(OpSend, a[i], msgs[i], uint64(i))
	}
	if r.Queued() != pairs {
		t.Fatalf("queued %d", r.Queued())
	}
	got := submit(t, r)
	if len(got) != pairs {
		t.Fatalf("%d results for %d sends", len(got), pairs)
	}
	for _, g := range got {
		if int(g.res) != len(msgs[g.tag]) {
			t.Errorf("send %d: %d, want %d", g.tag, g.res, len(msgs[g.tag]))
		}
	}
	bufs := [pairs][]byte{}
	for i := range pairs {
		bufs[i] = make([]byte, 8192)
		r.Queue(OpRecv, b[i], bufs[i], uint64(10+i))
	}
	for _, g := range submit(t, r) {
		i := g.tag - 10
		if g.res < 0 || !bytes.Equal(bufs[i][:g.res], msgs[i]) {
			t.Errorf("recv %d: %d %q", i, g.res, bufs[i][:max(g.res, 0)])
		}
	}
}

// A call that would wait fails at once with EAGAIN, as on a non-blocking
// socket, though these sockets block: Submit never leaves one in flight.
func TestCallsThatWouldWaitFailAtOnce(t *testing.T) {
	r := newRing(t, 8)
	a, b := testutil.LoopbackFDs(t)
	for _, fd := range []int32{a, b} {
		if err := syscall.SetNonblock(int(fd), false); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 64)
	r.Queue(OpRecv, b, buf, 1)
	if got := submit(t, r); len(got) != 1 || got[0].res != -int32(syscall.EAGAIN) {
		t.Fatalf("recv with nothing sent: %+v, want EAGAIN", got)
	}
	// Fill a's send buffer and b's receive buffer.
	big := make([]byte, 1<<20)
	sent := 0
	for {
		r.Queue(OpSend, a, big, 2)
		got := submit(t, r)
		if got[0].res == -int32(syscall.EAGAIN) {
			break
		}
		if got[0].res <= 0 {
			t.Fatalf("send: %d", got[0].res)
		}
		if sent += int(got[0].res); sent > 64<<20 {
			t.Fatal("the send buffer never filled")
		}
	}
}

// Calls on one socket are made in the order queued.
func TestOneSocketsCallsInOrder(t *testing.T) {
	r := newRing(t, 8)
	a, b := testutil.LoopbackFDs(t)
	for i, m := range []string{"first ", "second ", "third"} {
		r.Queue(OpSend, a, []byte(m), uint64(i))
	}
	submit(t, r)
	buf := make([]byte, 64)
	r.Queue(OpRecv, b, buf, 0)
	got := submit(t, r)
	if s := string(buf[:max(got[0].res, 0)]); s != "first second third" {
		t.Fatalf("read %q", s)
	}
}

func TestFull(t *testing.T) {
	r := newRing(t, 4)
	a, _ := testutil.LoopbackFDs(t)
	for range 4 {
		if r.Full() {
			t.Fatal("full early")
		}
		r.Queue(OpSend, a, []byte("x"), 0)
	}
	if !r.Full() {
		t.Fatal("not full after 4 of 4")
	}
	submit(t, r)
	if r.Full() {
		t.Fatal("full after Submit")
	}
}

// A batch the kernel refuses is withdrawn whole: none of its calls is
// made, and each is reported so the caller makes it another way.
func TestRefusedBatchIsWithdrawn(t *testing.T) {
	r := newRing(t, 8)
	a, b := testutil.LoopbackFDs(t)
	r.Queue(OpSend, a, []byte("lost?"), 7)
	r.Queue(OpSend, a, []byte("twice?"), 8)
	_ = syscall.Close(r.fd) // every io_uring_enter now fails (EBADF)
	r.fd = -1
	var got []result
	err := r.Submit(func(tag uint64, res int32) { got = append(got, result{tag, res}) })
	if !errors.Is(err, syscall.EBADF) {
		t.Fatalf("Submit: %v, want EBADF", err)
	}
	if len(got) != 2 || got[0] != (result{7, Withdrawn}) || got[1] != (result{8, Withdrawn}) {
		t.Fatalf("reported %+v", got)
	}
	if n, err := syscall.Read(int(b), make([]byte, 16)); err != syscall.EAGAIN {
		t.Fatalf("read %d bytes (%v) of a withdrawn batch", n, err)
	}
}

func TestSubmitAllocs(t *testing.T) {
	r := newRing(t, 8)
	a, b := testutil.LoopbackFDs(t)
	msg, buf := []byte("ping"), make([]byte, 16)
	var sum int32
	done := func(_ uint64, res int32) { sum += res }
	allocs := testing.AllocsPerRun(200, func() {
		r.Queue(OpSend, a, msg, 0)
		_ = r.Submit(done)
		r.Queue(OpRecv, b, buf, 1)
		_ = r.Submit(done)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per send and receive", allocs)
	}
}

// BenchmarkSendsAndReceives is a batch of 64-byte loopback sends and the
// receives that take them, one and eight of each, made one syscall each
// and through a ring (one io_uring_enter for the sends, one for the
// receives): what the ring saves is kernel entries and exits, and what it
// costs is its own work for each call.
func BenchmarkSendsAndReceives(b *testing.B) {
	msg, buf := make([]byte, 64), make([]byte, 4096)
	for _, n := range []int{1, 8} {
		pairs := func(b *testing.B) (a, c []int32) {
			for range n {
				x, y := testutil.LoopbackFDs(b)
				a, c = append(a, x), append(c, y)
			}
			return a, c
		}
		b.Run(fmt.Sprintf("%d/syscalls", n), func(b *testing.B) {
			a, c := pairs(b)
			for b.Loop() {
				for i := range n {
					if _, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(a[i]), uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg)), syscall.MSG_DONTWAIT, 0, 0); e != 0 {
						b.Fatal(e)
					}
				}
				for i := range n {
					if _, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(c[i]), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), syscall.MSG_DONTWAIT, 0, 0); e != 0 {
						b.Fatal(e)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("%d/ring", n), func(b *testing.B) {
			r, err := New(16)
			if err != nil {
				b.Skipf("no io_uring here: %v", err)
			}
			defer r.Close()
			a, c := pairs(b)
			failed := false
			check := func(_ uint64, res int32) { failed = failed || res <= 0 }
			for b.Loop() {
				for i := range n {
					r.Queue(OpSend, a[i], msg, 0)
				}
				_ = r.Submit(check)
				for i := range n {
					r.Queue(OpRecv, c[i], buf, 0)
				}
				_ = r.Submit(check)
				if failed {
					b.Fatal("a call failed")
				}
			}
		})
	}
}

// BenchmarkNullSyscall is the cost of entering and leaving the kernel
// (getppid, which does nothing): what a ring saves per call it batches.
func BenchmarkNullSyscall(b *testing.B) {
	for b.Loop() {
		syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0)
	}
}
