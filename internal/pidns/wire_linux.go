package pidns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The protocol. The server and the init share a SOCK_SEQPACKET socket: every message arrives whole or
// not at all, in order. A message is one type byte, one flags byte and a payload; a request larger than
// one message is cut into chunks, all but the last flagged more, its descriptors riding on the first.
// Numbers are little-endian; a string is its length (u32) and its bytes.
//
//	server -> init  spawn:   id u64, attr u32, ctty u32, open str (a byte per descriptor: 1 passed, 0 closed),
//	                         [uid u32, gid u32, ngroups u32, groups u32...], dir str, argc u32, argv str...,
//	                         envc u32, env str...  + descriptors: the files, then the cgroup (attrCgroup)
//	init -> server  hello:   flags u32 (helloProc: /proc was mounted), note str
//	                spawned: id u64, pid i64 (as the server sees it, 0 if unknown), nspid i64, start u64
//	                         + the task's pidfd
//	                failed:  id u64, errno u32, message str
//	                exit:    id u64, wait status u32 (after the task's spawned, always)
//	                idle:    (empty) the namespace has been empty for the idle period; the init exits
//	                         now, and starts nothing of what it has not answered
const (
	msgSpawn   = 1
	msgHello   = 2
	msgSpawned = 3
	msgFailed  = 4
	msgExit    = 5
	msgIdle    = 6

	flagMore = 1 // another chunk of the same request follows

	// Bits of a spawn's attr.
	attrSetpgid    = 1 << 0
	attrSetsid     = 1 << 1
	attrSetctty    = 1 << 2
	attrForeground = 1 << 3
	attrCgroup     = 1 << 4
	attrCred       = 1 << 5

	helloProc = 1
)

// Bounds. A chunk stays well below a socket's default send buffer (about 208 KiB), which a datagram
// may not exceed; a request may not exceed what execve accepts anyway (argv and environment together
// are capped at a quarter of the stack limit, 2 MiB by default).
const (
	maxChunk    = 64 << 10
	maxRequest  = 4 << 20
	maxStrings  = 1 << 16 // argv or environment entries
	maxGroups   = 1 << 16
	maxFiles    = 128 // a task's descriptor table, closed ones included (reaper's cwd pipe is 97)
	maxSent     = 16  // descriptors passed with one request, the cgroup's included
	maxFDs      = maxSent
	maxReply    = 4 << 10 // any message from the init
	maxErrorMsg = 1 << 10
)

// errProtocol marks a message that breaks the protocol: a bug, or a peer that is not what it should be.
var errProtocol = errors.New("pidns protocol error")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errProtocol, fmt.Sprintf(format, args...))
}

// encoder appends a payload.
type encoder struct{ b []byte }

func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }

func (e *encoder) strs(ss []string) {
	e.u32(uint32(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

// decoder reads a payload; the first failure sticks, and every later read returns zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = protocolError("truncated or oversized %s", what)
	}
}

func (d *decoder) u32(what string) uint32 {
	if d.err != nil || len(d.b) < 4 {
		d.fail(what)
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64(what string) uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.fail(what)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) str(what string) string {
	n := d.u32(what)
	if d.err != nil || uint64(n) > uint64(len(d.b)) {
		d.fail(what)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) strs(what string) []string {
	n := d.u32(what)
	if d.err != nil || n > maxStrings || uint64(n)*4 > uint64(len(d.b)) {
		d.fail(what)
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str(what)
	}
	return out
}

// end fails unless the whole payload was read.
func (d *decoder) end(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = protocolError("%d bytes after the %s", len(d.b), what)
	}
	return d.err
}

// conn is one end of the socket, on the runtime's network poller: a goroutine waiting to read or to
// write holds no thread. (A read blocked in recvmsg would hold one thread per session in the server,
// and, in the init, whose runtime has few, could leave no thread to run what wakes up.)
type conn struct {
	f  *os.File
	rc syscall.RawConn
}

// newConn takes over fd, which must be a socket.
func newConn(fd int, name string) (*conn, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &conn{f: f, rc: rc}, nil
}

// close closes the socket; a read or write waiting on it returns at once.
func (c *conn) close() error { return c.f.Close() }

// send writes one message with its descriptors. MSG_NOSIGNAL: a peer that is gone is EPIPE, not a
// SIGPIPE.
func (c *conn) send(typ, flags byte, payload []byte, fds []int) error {
	msg := make([]byte, 2+len(payload))
	msg[0], msg[1] = typ, flags
	copy(msg[2:], payload)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	var err error
	werr := c.rc.Write(func(fd uintptr) bool {
		err = unix.Sendmsg(int(fd), msg, oob, nil, unix.MSG_NOSIGNAL)
		return !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR)
	})
	return cmpErr(werr, err)
}

// sendChunked writes a payload as one message or as chunks, the descriptors with the first.
func (c *conn) sendChunked(typ byte, payload []byte, fds []int) error {
	for {
		n := min(len(payload), maxChunk)
		var flags byte
		if n < len(payload) {
			flags = flagMore
		}
		if err := c.send(typ, flags, payload[:n], fds); err != nil {
			return err
		}
		payload, fds = payload[n:], nil
		if flags == 0 {
			return nil
		}
	}
}

// recv reads one message into buf (which must hold maxChunk+2 bytes) and returns its type, flags and
// payload (a slice of buf), and the descriptors that came with it (close-on-exec; the caller owns them,
// also when an error is returned with them). The end of the peer is io.EOF.
func (c *conn) recv(buf []byte, maxfds int) (typ, flags byte, payload []byte, fds []int, err error) {
	oob := make([]byte, unix.CmsgSpace(maxfds*4))
	var n, oobn, rflags int
	rerr := c.rc.Read(func(fd uintptr) bool {
		n, oobn, rflags, _, err = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR)
	})
	if err = cmpErr(rerr, err); err != nil {
		return 0, 0, nil, nil, err
	}
	if oobn > 0 {
		fds, err = parseRights(oob[:oobn])
	}
	switch {
	case err != nil:
		return 0, 0, nil, fds, err
	case rflags&unix.MSG_CTRUNC != 0:
		return 0, 0, nil, fds, protocolError("more than %d descriptors in a message", maxfds)
	case rflags&unix.MSG_TRUNC != 0:
		return 0, 0, nil, fds, protocolError("a message over %d bytes", len(buf))
	case n == 0 && len(fds) == 0:
		return 0, 0, nil, nil, io.EOF
	case n < 2:
		return 0, 0, nil, fds, protocolError("a message of %d bytes", n)
	}
	return buf[0], buf[1], buf[2:n], fds, nil
}

// parseRights returns the descriptors in SCM_RIGHTS messages of oob.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, protocolError("control message: %v", err)
	}
	var fds []int
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			closeAll(fds)
			return nil, protocolError("descriptors: %v", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// checkString refuses what execve cannot take: a NUL byte ends a C string.
func checkString(what, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s %q contains a NUL byte", what, s)
	}
	return nil
}
