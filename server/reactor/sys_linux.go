//go:build linux

package reactor

import (
	"encoding/binary"
	"net/netip"
	"syscall"
	"unsafe"

	"github.com/tollgate/tollgate/internal/sockpeek"
)

// The socket calls of accepting, watching and closing a connection, made
// without telling the runtime, as sockRecv and sockSend are: none of them
// blocks, and a syscall the runtime knows of lets its monitor hand the
// loop's P to another thread whenever one lasts over 20 µs (closing a
// loopback socket runs the peer's TCP path), which costs a thread wake-up
// and a context switch. With Connection: close on every request, the
// runtime's monitor went round 2,064 times in 2 s for this, 172 times
// with the raw calls (bench/RESULTS.md, "New connections without the
// runtime's poller").

func sysClose(fd int32) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0); e != 0 {
		return e
	}
	return nil
}

// sysDupCloexec is a close-on-exec duplicate of fd, or -1.
func sysDupCloexec(fd uintptr) int32 {
	r, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1
	}
	return int32(r)
}

func sysShutdown(fd int32, how int) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_SHUTDOWN, uintptr(fd), uintptr(how), 0); e != 0 {
		return e
	}
	return nil
}

// sysPeek reports how many bytes (0 or 1) a look at fd's input finds,
// without taking them or waiting.
func sysPeek(fd int32) int {
	n, _ := sockpeek.Byte(uintptr(fd))
	return n
}

func sysNoDelay(fd int32) {
	one := int32(1)
	_, _, _ = syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY,
		uintptr(unsafe.Pointer(&one)), 4, 0)
}

func sysEpollCtl(epfd int, op int, fd int32, ev *syscall.EpollEvent) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd),
		uintptr(unsafe.Pointer(ev)), 0, 0); e != 0 {
		return e
	}
	return nil
}

// sysAccept takes a connection from the non-blocking listening socket lfd:
// a non-blocking, close-on-exec socket and its peer's address.
func sysAccept(lfd uintptr) (int32, netip.AddrPort, error) {
	var sa syscall.RawSockaddrAny
	n := uint32(syscall.SizeofSockaddrAny)
	r, _, e := syscall.RawSyscall6(syscall.SYS_ACCEPT4, lfd, uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&n)),
		syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0, 0)
	if e != 0 {
		return -1, netip.AddrPort{}, e
	}
	return int32(r), rawAddrPort(&sa), nil
}

// rawAddrPort reads an IPv4 or IPv6 socket address as the kernel wrote it
// (the port in network byte order).
func rawAddrPort(sa *syscall.RawSockaddrAny) netip.AddrPort {
	switch sa.Addr.Family {
	case syscall.AF_INET:
		a := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&a.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), port)
	case syscall.AF_INET6:
		a := (*syscall.RawSockaddrInet6)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&a.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), port)
	}
	return netip.AddrPort{}
}
