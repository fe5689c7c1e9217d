//go:build linux

package reactor

import (
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

func TestAsyncPreemptOn(t *testing.T) {
	for _, c := range []struct {
		godebug string
		want    bool
	}{
		{"", true},
		{"asyncpreemptoff=1", false},
		{"asyncpreemptoff=0", true},
		{"gctrace=1, asyncpreemptoff=1", false},
		{"asyncpreemptoff=1,asyncpreemptoff=0", true},
		{"xasyncpreemptoff=1", true},
	} {
		if got := asyncPreemptOn(c.godebug); got != c.want {
			t.Errorf("asyncPreemptOn(%q) = %v, want %v", c.godebug, got, c.want)
		}
	}
}

// A goroutine waiting in epoll_pwait while holding its P must not hold up
// a stop of the world: the runtime's signal ends the wait (EINTR) and the
// goroutine stops at its next call, as a loop does on its way back from
// waitEvents. Without that, the collection below would wait for the
// whole 3 s timeout.
func TestWaitHoldingPLetsTheWorldStop(t *testing.T) {
	if !waitHoldingP {
		t.Skip("asynchronous preemption is off")
	}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(epfd)
	// An eventfd to end the last wait with once the test is done.
	r, _, errno := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	wake := int(r)
	defer syscall.Close(wake)
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, wake, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(wake)}); err != nil {
		t.Fatal(err)
	}
	events := make([]syscall.EpollEvent, 4)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		interrupted := 0
		for {
			select {
			case <-stop:
				done <- interrupted
				return
			default:
			}
			if _, errno := epollWaitHoldingP(epfd, uintptr(unsafe.Pointer(&events[0])), len(events), 3000); errno == syscall.EINTR {
				interrupted++
			}
		}
	}()
	time.Sleep(20 * time.Millisecond) // the goroutine is in its wait
	for range 3 {
		start := time.Now()
		runtime.GC()
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a collection took %v with a goroutine waiting holding its P", d)
		}
	}
	close(stop)
	if _, err := syscall.Write(wake, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if n := <-done; n == 0 {
		t.Fatal("the wait was never interrupted: the collections did not need it to stop")
	}
}
