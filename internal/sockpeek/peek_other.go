//go:build !linux

package sockpeek

import "syscall"

// Byte looks at fd's next input byte: n is 1 when there is one, 0 at the
// end of input (errno 0) or when a read would wait (errno EAGAIN).
func Byte(fd uintptr) (n int, errno syscall.Errno) {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	if err != nil {
		if e, ok := err.(syscall.Errno); ok {
			return 0, e
		}
		return 0, syscall.EIO
	}
	return n, 0
}

// Pending reports that a read of fd would not wait: bytes, the end of
// input, or an error.
func Pending(fd uintptr) bool {
	_, e := Byte(fd)
	return e != syscall.EAGAIN
}
