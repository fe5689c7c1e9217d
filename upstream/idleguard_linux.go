package upstream

import (
	"syscall"
	"unsafe"
)

// inputPending reports bytes to read on fd, its end of input, or an
// error; false when a read would wait.
func inputPending(fd uintptr) bool {
	var b [1]byte
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return e != syscall.EAGAIN
}
