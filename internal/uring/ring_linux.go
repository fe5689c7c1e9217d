//go:build linux

// Package uring makes many socket sends and receives in one syscall: they
// are queued in an io_uring's submission ring and made by one
// io_uring_enter, which returns once each has its result. Every call is
// made without waiting (MSG_DONTWAIT): one that would wait fails with
// EAGAIN, as recv(2) and send(2) on a non-blocking socket do, so a batch
// never leaves a call in flight and never blocks.
//
// Where a syscall is dear (a guest whose every kernel entry costs about a
// microsecond), eight loopback sends and the eight receives that take them
// cost 24 µs through a ring against 47 µs one syscall each; one of each
// costs more through the ring, 6.7 µs against 5.8 (BenchmarkSendsAndReceives,
// bench/RESULTS.md "Socket calls in batches").
//
// A Ring is used by one goroutine at a time; it holds no lock.
package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ops a Ring makes.
const (
	OpSend uint8 = 26 // IORING_OP_SEND
	OpRecv uint8 = 27 // IORING_OP_RECV
)

const (
	sysSetup    = 425 // io_uring_setup
	sysEnter    = 426 // io_uring_enter
	sysRegister = 427 // io_uring_register

	setupSubmitAll   = 1 << 7 // IORING_SETUP_SUBMIT_ALL: a failed call does not stop the batch
	setupCoopTaskrun = 1 << 8 // IORING_SETUP_COOP_TASKRUN: no signal-like interruption for completions

	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	registerProbe    = 8 // IORING_REGISTER_PROBE
	probeOpSupported = 1 // IO_URING_OP_SUPPORTED
	featSingleMmap   = 1 << 0
	sqeSize          = 64
	cqeSize          = 16
	probeOps         = 64
)

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sq                                                                     sqOffsets
	cq                                                                     cqOffsets
}

// sqe is struct io_uring_sqe.
type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	msgFlags uint32
	userData uint64
	bufIndex uint16
	pers     uint16
	spliceFd int32
	addr3    uint64
	pad      uint64
}

// cqe is struct io_uring_cqe.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

type probe struct {
	lastOp, opsLen uint8
	resv           uint16
	resv2          [3]uint32
	ops            [probeOps]struct {
		op, resv uint8
		flags    uint16
		resv2    uint32
	}
}

// Ring is an io_uring for batches of socket calls.
type Ring struct {
	fd int

	sqHead, sqTail *uint32
	sqMask         uint32
	sqes           []sqe
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []cqe

	tail    uint32 // the next free submission slot (published at Submit)
	queued  uint32 // calls queued since the last Submit
	flight  uint32 // calls submitted whose results are not reaped
	maps    [][]byte
	entries uint32
	made    atomic.Uint64 // calls made through the ring, for Made
}

// ErrUnsupported is returned by New when the kernel has no io_uring, or
// one without socket sends and receives, or forbids it (a seccomp filter,
// kernel.io_uring_disabled).
var ErrUnsupported = errors.New("io_uring unavailable")

// New sets up a ring with room for entries calls per Submit (a power of
// two, at most 32768).
func New(entries uint32) (*Ring, error) {
	var p params
	p.flags = setupSubmitAll | setupCoopTaskrun
	fd, _, e := syscall.RawSyscall(sysSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e == syscall.EINVAL {
		// A kernel before 5.19 knows neither flag.
		p = params{}
		fd, _, e = syscall.RawSyscall(sysSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	}
	if e != 0 {
		return nil, fmt.Errorf("%w: io_uring_setup: %v", ErrUnsupported, e)
	}
	r := &Ring{fd: int(fd), entries: p.sqEntries}
	if err := r.mapRings(&p); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.probe(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Ring) mapRings(p *params) error {
	sqLen := int(p.sq.array + p.sqEntries*4)
	cqLen := int(p.cq.cqes + p.cqEntries*cqeSize)
	single := p.features&featSingleMmap != 0
	if single {
		sqLen = max(sqLen, cqLen)
	}
	mapping := func(off int64, n int) ([]byte, error) {
		b, err := unix.Mmap(r.fd, off, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return nil, fmt.Errorf("%w: mmap: %v", ErrUnsupported, err)
		}
		r.maps = append(r.maps, b)
		return b, nil
	}
	sq, err := mapping(offSQRing, sqLen)
	if err != nil {
		return err
	}
	cq := sq
	if !single {
		if cq, err = mapping(offCQRing, cqLen); err != nil {
			return err
		}
	}
	sqesMem, err := mapping(offSQEs, int(p.sqEntries)*sqeSize)
	if err != nil {
		return err
	}
	sqBase, cqBase := unsafe.Pointer(&sq[0]), unsafe.Pointer(&cq[0])
	r.sqHead = (*uint32)(unsafe.Add(sqBase, p.sq.head))
	r.sqTail = (*uint32)(unsafe.Add(sqBase, p.sq.tail))
	r.sqMask = *(*uint32)(unsafe.Add(sqBase, p.sq.ringMask))
	// Slot i of the submission ring always names entry i.
	array := unsafe.Slice((*uint32)(unsafe.Add(sqBase, p.sq.array)), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&sqesMem[0])), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Add(cqBase, p.cq.head))
	r.cqTail = (*uint32)(unsafe.Add(cqBase, p.cq.tail))
	r.cqMask = *(*uint32)(unsafe.Add(cqBase, p.cq.ringMask))
	r.cqes = unsafe.Slice((*cqe)(unsafe.Add(cqBase, p.cq.cqes)), p.cqEntries)
	r.tail = atomic.LoadUint32(r.sqTail)
	return nil
}

// probe checks that the kernel makes both calls through a ring (5.6 on).
func (r *Ring) probe() error {
	var pr probe
	_, _, e := syscall.RawSyscall6(sysRegister, uintptr(r.fd), registerProbe, uintptr(unsafe.Pointer(&pr)), probeOps, 0, 0)
	if e != 0 {
		return fmt.Errorf("%w: probe: %v", ErrUnsupported, e)
	}
	for _, op := range []uint8{OpSend, OpRecv} {
		if op > pr.lastOp || pr.ops[op].flags&probeOpSupported == 0 {
			return fmt.Errorf("%w: no socket op %d", ErrUnsupported, op)
		}
	}
	return nil
}

// Close releases the ring; calls queued and not submitted are dropped.
func (r *Ring) Close() {
	for _, b := range r.maps {
		_ = unix.Munmap(b)
	}
	r.maps = nil
	if r.fd >= 0 {
		_ = syscall.Close(r.fd)
		r.fd = -1
	}
}

// Made is how many calls the ring has made; any goroutine may ask.
func (r *Ring) Made() uint64 { return r.made.Load() }

// FD is the ring's file descriptor.
func (r *Ring) FD() int { return r.fd }

// Full reports that no call can be queued before the next Submit.
func (r *Ring) Full() bool { return r.queued+r.flight >= r.entries }

// Queue adds a send (OpSend) or receive (OpRecv) of p on socket fd to the
// next Submit; tag comes back with its result. The caller keeps p
// reachable and unused until then. The ring must not be Full.
func (r *Ring) Queue(op uint8, fd int32, p []byte, tag uint64) {
	e := &r.sqes[r.tail&r.sqMask]
	*e = sqe{
		opcode:   op,
		fd:       fd,
		addr:     uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p)))),
		len:      uint32(len(p)),
		msgFlags: syscall.MSG_DONTWAIT,
		userData: tag,
	}
	if op == OpSend {
		e.msgFlags |= syscall.MSG_NOSIGNAL
	}
	r.tail++
	r.queued++
}

// Queued is how many calls wait for Submit.
func (r *Ring) Queued() int { return int(r.queued) }

// Unqueue drops the calls queued since the last Submit, unmade.
func (r *Ring) Unqueue() {
	r.tail -= r.queued
	r.queued = 0
}

// Withdrawn is the result Submit reports for a call it did not make: the
// caller makes it another way.
const Withdrawn int32 = -1 << 31

// Submit makes the queued calls, in the order queued, and returns once
// each has its result: done is called with each call's tag and result
// (bytes, or a negated errno). When the kernel refuses the batch, its
// calls are reported Withdrawn and the error says why.
func (r *Ring) Submit(done func(tag uint64, res int32)) error {
	if r.queued == 0 {
		return nil
	}
	atomic.StoreUint32(r.sqTail, r.tail)
	n := r.queued
	r.queued = 0
	var err error
	for n > 0 {
		got, _, e := syscall.RawSyscall6(sysEnter, uintptr(r.fd), uintptr(n), 0, 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			// The calls the kernel has not taken are withdrawn.
			err = fmt.Errorf("io_uring_enter: %w", e)
			head := atomic.LoadUint32(r.sqHead)
			for i := head; i != r.tail; i++ {
				done(r.sqes[i&r.sqMask].userData, Withdrawn)
			}
			r.tail = head
			atomic.StoreUint32(r.sqTail, head)
			break
		}
		r.flight += uint32(got)
		n -= uint32(got)
	}
	r.reap(done)
	for r.flight > 0 {
		// Not made at once (a kernel that hands a call to a worker even
		// when it need not wait): wait for them.
		_, _, e := syscall.Syscall6(sysEnter, uintptr(r.fd), 0, uintptr(r.flight), enterGetEvents, 0, 0)
		if e != 0 && e != syscall.EINTR {
			return fmt.Errorf("io_uring_enter: wait: %w", e)
		}
		r.reap(done)
	}
	return err
}

func (r *Ring) reap(done func(tag uint64, res int32)) {
	n := uint64(0)
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		c := &r.cqes[head&r.cqMask]
		done(c.userData, c.res)
		r.flight--
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	if n > 0 {
		r.made.Add(n)
	}
}
