//go:build linux

package reactor

import (
	"fmt"
	"syscall"

	"github.com/tollgate/tollgate/internal/uring"
)

// Socket calls in batches: a fiber's recv or send is queued in its loop's
// io_uring and the fiber yields; once the loop has run every fiber the
// batch of events woke, it makes all their calls with one io_uring_enter
// and resumes each fiber with its call's result, in the order they were
// queued. The calls are the ones sockRecv and sockSend make, and fail the
// same way (EAGAIN when the socket has no bytes or no room): only how
// many syscalls they take differs. A proxied request makes four socket
// calls; with eight requests to a batch of events they take four syscalls
// instead of thirty-two (bench/RESULTS.md, "Socket calls in batches"). A
// call queued alone is made as a syscall of its own, which costs less.

// ringEntries is how many calls a loop queues before it must submit: a
// batch of events (256 at most) reads at most that many sockets.
const ringEntries = 512

// setRing gives the loop a ring for its socket calls, or reports why it
// cannot have one.
func (s *evState) setRing() error {
	r, err := uring.New(s.t.ringEntries)
	if err != nil {
		return err
	}
	s.ring = r
	return nil
}

// sockCall makes a recv (uring.OpRecv) or send of p on fd for fiber f: in
// the loop's next batch when f is running on a loop with a ring, at once
// otherwise.
func (s *evState) sockCall(f *fiber, op uint8, fd int32, p []byte) (int, error) {
	if s.ring == nil || f == nil || s.cur != f {
		return sockDirect(op, fd, p)
	}
	if s.ring.Full() {
		s.submit()
		if s.ring == nil {
			return sockDirect(op, fd, p)
		}
	}
	// Kept on the fiber until the call is made: the kernel reads or
	// writes p after this frame has yielded, and a buffer held here is
	// on the heap, where nothing moves it.
	f.ioBuf = p
	f.ioOp, f.ioFd = op, fd
	f.ioRes = -int32(syscall.EIO) // if the ring never reports it
	s.ring.Queue(op, fd, p, uint64(len(s.inRing)))
	s.inRing = append(s.inRing, f)
	f.yield(fiberWait)
	res := f.ioRes
	f.ioBuf = nil
	if res < 0 {
		return 0, syscall.Errno(-res)
	}
	return int(res), nil
}

func sockDirect(op uint8, fd int32, p []byte) (int, error) {
	if op == uring.OpRecv {
		return sockRecv(fd, p)
	}
	return sockSend(fd, p)
}

// submit makes the queued calls and notes their results on their fibers,
// which stay queued until flush resumes them. A ring the kernel refuses is
// given up: its calls are made at once, and so are all later ones.
func (s *evState) submit() {
	if err := s.ring.Submit(s.noteResult); err != nil {
		s.ring.Close()
		s.ring = nil
		s.t.ringFailed(err)
	}
}

func (s *evState) noteResult(tag uint64, res int32) {
	f := s.inRing[tag]
	if res == uring.Withdrawn {
		s.callDirect(f)
		return
	}
	f.ioRes = res
}

// callDirect makes f's queued call with a syscall of its own.
func (s *evState) callDirect(f *fiber) {
	n, err := sockDirect(f.ioOp, f.ioFd, f.ioBuf)
	if errno, ok := err.(syscall.Errno); ok {
		f.ioRes = -int32(errno)
	} else {
		f.ioRes = int32(n)
	}
}

// flush makes the queued calls and resumes their fibers, until the
// fibers it resumes queue no more.
func (s *evState) flush() {
	for len(s.inRing) > 0 {
		switch {
		case s.ring == nil:
			// Given up in this round (submit): every call has its result.
		case s.ring.Queued() == 1:
			// Alone, a call costs less as a syscall of its own than
			// through the ring: 5.8 µs for a send and its receive
			// against 6.7 (uring.BenchmarkSendsAndReceives), and the
			// open loop's tail was shorter (bench/RESULTS.md, "Socket
			// calls in batches"). The queued calls are the last in
			// inRing.
			s.ring.Unqueue()
			s.callDirect(s.inRing[len(s.inRing)-1])
		default:
			s.submit()
		}
		batch := s.inRing
		s.inRing = s.spareRing[:0]
		for i, f := range batch {
			batch[i] = nil
			s.run(f)
		}
		s.spareRing = batch[:0]
	}
}

// checkRing sees, once the transport is made, whether its loops can have
// rings: with IOUring "on" a kernel that refuses one is an error then, not
// at the first Serve.
func (t *reactorTransport) checkRing() error {
	if t.o.IOUring == "off" {
		t.noteCalls("one syscall each (io_uring: off)")
		return nil
	}
	r, err := uring.New(8)
	if err != nil {
		if t.o.IOUring == "on" {
			return fmt.Errorf("io_uring: on: %w", err)
		}
		t.noteCalls("one syscall each (" + err.Error() + ")")
		return nil
	}
	r.Close()
	t.ringsOK = true
	t.noteCalls("in batches through io_uring")
	return nil
}

// setRings gives each event loop a ring when checkRing found the kernel
// allows them; with IOUring "on", a ring refused now is an error.
func (t *reactorTransport) setRings(loops []*epollLoop) error {
	if !t.ringsOK {
		return nil
	}
	for _, l := range loops {
		if err := l.ev.setRing(); err != nil {
			for _, l := range loops {
				if r := l.ev.ring; r != nil {
					r.Close()
					l.ev.ring = nil
				}
			}
			if t.o.IOUring == "on" {
				return fmt.Errorf("io_uring: on: %w", err)
			}
			t.noteCalls("one syscall each (" + err.Error() + ")")
			return nil
		}
	}
	t.ringLoops.Store(int32(len(loops)))
	return nil
}

// ringFailed notes that a loop's ring was refused mid-run: that loop makes
// its calls one by one from then on.
func (t *reactorTransport) ringFailed(err error) {
	t.ringLoops.Add(-1)
	t.noteCalls("one syscall each on a loop since its io_uring failed (" + err.Error() + ")")
}
