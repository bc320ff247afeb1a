package httpguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The uid of a loopback peer, asked of the kernel's socket diagnostics (sock_diag, NETLINK_SOCK_DIAG)
// by the connection's exact addresses: one lookup in the kernel's table of connections, not a read
// of /proc/net/tcp (as long as the table) or of every process's descriptors. golang.org/x/sys/unix
// has the constants but not the request's and answer's layouts (linux/inet_diag.h), written below.

const (
	inetDiagReqLen = 56 // struct inet_diag_req_v2
	inetDiagMsgLen = 72 // struct inet_diag_msg
	nlmsgHdrLen    = 16
)

// loopbackUID returns the uid that owns the socket at the other end of a loopback TCP connection
// whose local address is local and remote address is remote (as the server sees them).
func loopbackUID(local, remote netip.AddrPort) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	// The kernel answers at once; a deadline all the same, as for every wait.
	tv := unix.NsecToTimeval((time.Second).Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)

	family := uint8(unix.AF_INET)
	if remote.Addr().Is6() && !remote.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	req := make([]byte, nlmsgHdrLen+inetDiagReqLen)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	r := req[nlmsgHdrLen:]
	r[0] = family
	r[1] = unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(r[4:], ^uint32(0)) // every state
	// inet_diag_sockid of the peer's socket: its source is our remote, its destination our local.
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], remote.Port())
	binary.BigEndian.PutUint16(id[2:], local.Port())
	putAddr(id[4:20], remote.Addr(), family)
	putAddr(id[20:36], local.Addr(), family)
	binary.NativeEndian.PutUint32(id[36:], 0)          // interface: any
	binary.NativeEndian.PutUint32(id[40:], ^uint32(0)) // cookie: INET_DIAG_NOCOOKIE
	binary.NativeEndian.PutUint32(id[44:], ^uint32(0))

	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag request: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, fmt.Errorf("sock_diag answer: %w", err)
	}
	return parseDiag(buf[:n])
}

// parseDiag reads the uid from the kernel's answer to one exact lookup.
func parseDiag(b []byte) (uint32, error) {
	if len(b) < nlmsgHdrLen {
		return 0, errors.New("sock_diag answer: short")
	}
	switch typ := binary.NativeEndian.Uint16(b[4:]); typ {
	case unix.NLMSG_ERROR:
		if len(b) >= nlmsgHdrLen+4 {
			if e := int32(binary.NativeEndian.Uint32(b[nlmsgHdrLen:])); e != 0 {
				return 0, fmt.Errorf("sock_diag: %w", syscall.Errno(-e))
			}
		}
		return 0, errors.New("sock_diag: no such connection")
	case unix.SOCK_DIAG_BY_FAMILY:
	default:
		return 0, fmt.Errorf("sock_diag answer: message type %d", typ)
	}
	if len(b) < nlmsgHdrLen+inetDiagMsgLen {
		return 0, errors.New("sock_diag answer: short")
	}
	return binary.NativeEndian.Uint32(b[nlmsgHdrLen+64:]), nil // idiag_uid, after expires, rqueue, wqueue
}

// putAddr writes a as inet_diag_sockid writes an address: 4 bytes for AF_INET, 16 for AF_INET6.
func putAddr(dst []byte, a netip.Addr, family uint8) {
	if family == unix.AF_INET {
		v4 := a.Unmap().As4()
		copy(dst, v4[:])
		return
	}
	v6 := a.As16()
	copy(dst, v6[:])
}
