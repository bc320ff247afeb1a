package pidns

import (
	"cmp"
	"io"
	"os"
	"syscall"
)

// A sock is one end of the socket, on the runtime's network poller: a goroutine waiting to read or to
// write holds no thread. (A read blocked in recvmsg would hold one thread per session in the server,
// and, in the init, whose runtime has few, could leave no thread to run what wakes up.) Its Close
// makes a read or write waiting on it return at once.
type sock struct {
	*os.File
	rc syscall.RawConn
}

// newSock takes over fd, which must be a socket; name names it in errors.
func newSock(fd int, name string) (*sock, error) {
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &sock{File: f, rc: rc}, nil
}

// Shutdown shuts the socket down both ways: the peer reads its end, and a read here returns io.EOF.
func (c *sock) Shutdown() {
	c.rc.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
}

// Send writes one message with its descriptors. MSG_NOSIGNAL: a peer that is gone is EPIPE, not a
// SIGPIPE.
func (c *sock) Send(typ, flags byte, payload []byte, fds []int) error {
	msg := append([]byte{typ, flags}, payload...)
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	var err error
	werr := c.rc.Write(func(fd uintptr) bool {
		err = syscall.Sendmsg(int(fd), msg, oob, nil, syscall.MSG_NOSIGNAL)
		return err != syscall.EAGAIN && err != syscall.EINTR
	})
	return cmp.Or(werr, err)
}

// SendChunked writes a payload as one message or as chunks, the descriptors with the first.
func (c *sock) SendChunked(typ byte, payload []byte, fds []int) error {
	for {
		n := min(len(payload), maxChunk)
		var flags byte
		if n < len(payload) {
			flags = flagMore
		}
		if err := c.Send(typ, flags, payload[:n], fds); err != nil {
			return err
		}
		payload, fds = payload[n:], nil
		if flags == 0 {
			return nil
		}
	}
}

// Recv reads one message into buf (which must hold maxChunk+2 bytes) and returns its type, flags and
// payload (a slice of buf), and the descriptors that came with it (close-on-exec; the caller owns them,
// also when an error is returned with them), at most maxfds. The end of the peer is io.EOF.
func (c *sock) Recv(buf []byte, maxfds int) (typ, flags byte, payload []byte, fds []int, err error) {
	oob := make([]byte, syscall.CmsgSpace(maxfds*4))
	var n, oobn, rflags int
	if rerr := c.rc.Read(func(fd uintptr) bool {
		n, oobn, rflags, _, err = syscall.Recvmsg(int(fd), buf, oob, syscall.MSG_CMSG_CLOEXEC)
		return err != syscall.EAGAIN && err != syscall.EINTR
	}); rerr != nil || err != nil {
		return 0, 0, nil, nil, cmp.Or(rerr, err)
	}
	if oobn > 0 {
		fds, err = parseRights(oob[:oobn])
	}
	switch {
	case err != nil:
		return 0, 0, nil, fds, err
	case rflags&syscall.MSG_CTRUNC != 0:
		return 0, 0, nil, fds, protocolErr("more than %d descriptors in a message", maxfds)
	case rflags&syscall.MSG_TRUNC != 0:
		return 0, 0, nil, fds, protocolErr("a message over %d bytes", len(buf))
	case n == 0 && len(fds) == 0:
		return 0, 0, nil, nil, io.EOF
	case n < 2:
		return 0, 0, nil, fds, protocolErr("a message of %d bytes", n)
	}
	return buf[0], buf[1], buf[2:n], fds, nil
}

// parseRights returns the descriptors in SCM_RIGHTS messages of oob.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, protocolErr("control message: %v", err)
	}
	var fds []int
	for i := range msgs {
		if msgs[i].Header.Level != syscall.SOL_SOCKET || msgs[i].Header.Type != syscall.SCM_RIGHTS {
			continue
		}
		got, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			closeAll(fds)
			return nil, protocolErr("descriptors: %v", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// closeAll closes fds.
func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}
