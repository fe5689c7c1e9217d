// Package sockpeek looks at a socket's input without taking it or
// waiting: the one syscall the event loops (closed and stale connections)
// and the upstream pools (bytes no request asked for) both need.
package sockpeek

import (
	"syscall"
	"unsafe"
)

// Byte looks at fd's next input byte: n is 1 when there is one, 0 at the
// end of input (errno 0) or when a read would wait (errno EAGAIN).
func Byte(fd uintptr) (n int, errno syscall.Errno) {
	var b [1]byte
	r, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

// Pending reports that a read of fd would not wait: bytes, the end of
// input, or an error.
func Pending(fd uintptr) bool {
	_, e := Byte(fd)
	return e != syscall.EAGAIN
}
