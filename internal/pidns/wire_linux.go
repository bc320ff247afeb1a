package pidns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
)

// How the server starts the init: this program again, with InitArg as its first argument, then its
// mode (modeUserNS: it runs in a user namespace of its own, where it was given CAP_SYS_ADMIN as an
// ambient capability to mount /proc, which its tasks must not inherit; else modePlain), with its end
// of the socket as descriptor initFD. The init never ends by itself while the server lives: the
// server ends it (an idle one by shutting the socket down). The program's main dispatches on InitArg
// before it does anything else (see RunInit).
const (
	InitArg    = "--pidns-init"
	modeUserNS = "userns"
	modePlain  = "plain"
	initFD     = 3
)

// IsInit reports whether args (os.Args) ask for the init.
func IsInit(args []string) bool { return len(args) > 1 && args[1] == InitArg }

// The protocol. The server and the init share a SOCK_SEQPACKET socket: every message arrives whole or
// not at all, in order. A message is one type byte, one flags byte and a payload; a request larger than
// one message is cut into chunks, all but the last flagged flagMore, its descriptors riding on the
// first. Numbers are little-endian; a string is its length (u32) and its bytes.
//
//	server -> init  spawn:   id u64, attr u32, ctty u32, open str (a byte per descriptor: 1 passed, 0 closed),
//	                         [uid u32, gid u32, ngroups u32, groups u32...], dir str, argc u32, argv str...,
//	                         envc u32, env str...  + descriptors: the files, then the cgroup (attrCgroup)
//	                signal:  id u64, n u32, signal u32 (n of them, 1 to 4): the init sends each in turn to
//	                         every other process of its namespace (kill(2) with pid -1), then answers
//	init -> server  hello:   flags u32 (helloProc: /proc was mounted; helloDevpts: a devpts instance on
//	                         /dev/pts, whose root comes with it, O_PATH; helloTmp: a tmpfs on /tmp and
//	                         /dev/shm), note str (what failed)
//	                spawned: id u64, pid i64 (as the server sees it, 0 if unknown), nspid i64, start u64
//	                         + the task's pidfd
//	                failed:  id u64, errno u32, message str
//	                exit:    id u64, wait status u32, flags u32 (exitEmpty: the init had no child left
//	                         once it had reaped this one) (after the task's spawned, always)
//	                signaled: id u64, errno u32 (0, or the first failure other than ESRCH: no process
//	                         left to signal is no failure)
const (
	msgSpawn    = 1
	msgHello    = 2
	msgSpawned  = 3
	msgFailed   = 4
	msgExit     = 5
	msgSignal   = 6
	msgSignaled = 7

	flagMore = 1 // another chunk of the same request follows

	helloProc   = 1
	helloDevpts = 2
	helloTmp    = 4
	exitEmpty   = 1
)

// Bounds. A chunk stays well below a socket's default send buffer (about 208 KiB), which a datagram
// may not exceed; a request may not exceed what execve accepts anyway (argv and environment together
// are capped at a quarter of the stack limit, 2 MiB by default).
const (
	maxChunk    = 64 << 10
	maxRequest  = 4 << 20
	maxFDs      = maxSent // descriptors in one message
	maxReply    = 4 << 10 // any message from the init
	maxErrorMsg = 1 << 10

	maxStrings = 1 << 16 // argv or environment entries
	maxGroups  = 1 << 16
	maxFiles   = 128 // a task's descriptor table, closed ones included (reaper's cwd pipe is 97)
	maxSent    = 16  // descriptors passed with one request, the cgroup's included
)

// ErrProtocol marks a message that breaks the protocol: a bug, or a peer that is not what it should
// be. Errors from protocolErr wrap it.
var ErrProtocol = errors.New("pidns protocol error")

// protocolErr returns an error that says what broke the protocol (format and args, as fmt.Sprintf's)
// and wraps ErrProtocol.
func protocolErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// An encoder appends a payload to b; each method returns e, to append the next value.
type encoder struct{ b []byte }

func (e *encoder) U32(v uint32) *encoder {
	e.b = binary.LittleEndian.AppendUint32(e.b, v)
	return e
}

func (e *encoder) U64(v uint64) *encoder {
	e.b = binary.LittleEndian.AppendUint64(e.b, v)
	return e
}

func (e *encoder) Str(s string) *encoder {
	e.b = append(e.U32(uint32(len(s))).b, s...)
	return e
}

func (e *encoder) Strs(ss []string) *encoder {
	e.U32(uint32(len(ss)))
	for _, s := range ss {
		e.Str(s)
	}
	return e
}

// A decoder reads a payload, b; the first failure, err, sticks, and every later read returns zero
// values. what names the value read in the error.
type decoder struct {
	b   []byte
	err error
}

// fail records a truncated or oversized what, unless a failure came first.
func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = protocolErr("truncated or oversized %s", what)
	}
}

// take returns the next n bytes, or nil where fewer are left.
func (d *decoder) take(n uint64, what string) []byte {
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail(what)
		return nil
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

func (d *decoder) U32(what string) uint32 {
	if b := d.take(4, what); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) U64(what string) uint64 {
	if b := d.take(8, what); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) Str(what string) string { return string(d.take(uint64(d.U32(what)), what)) }

func (d *decoder) Strs(what string) []string {
	n := d.U32(what)
	if d.err != nil || n > maxStrings || uint64(n)*4 > uint64(len(d.b)) {
		d.fail(what)
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.Str(what)
	}
	return out
}

// End fails unless the whole payload was read.
func (d *decoder) End(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = protocolErr("%d bytes after the %s", len(d.b), what)
	}
	return d.err
}

// maxSignals bounds the signals of one signal request.
const maxSignals = 4

// encodeSignal encodes a signal request: id, then the signals the init sends in turn to every other
// process of its namespace.
func encodeSignal(id uint64, sigs []syscall.Signal) ([]byte, error) {
	if len(sigs) == 0 || len(sigs) > maxSignals {
		return nil, protocolErr("%d signals in a request (1 to %d)", len(sigs), maxSignals)
	}
	e := new(encoder).U64(id).U32(uint32(len(sigs)))
	for _, s := range sigs {
		if s <= 0 || s > 64 {
			return nil, protocolErr("signal %d", s)
		}
		e.U32(uint32(s))
	}
	return e.b, nil
}

// decodeSignal decodes a signal request.
func decodeSignal(payload []byte) (id uint64, sigs []syscall.Signal, err error) {
	d := &decoder{b: payload}
	id = d.U64("id")
	n := d.U32("signals")
	if d.err == nil && (n == 0 || n > maxSignals) {
		return 0, nil, protocolErr("%d signals in a request", n)
	}
	for range n {
		s := d.U32("signal")
		if d.err == nil && (s == 0 || s > 64) {
			return 0, nil, protocolErr("signal %d", s)
		}
		sigs = append(sigs, syscall.Signal(s))
	}
	if err := d.End("signal request"); err != nil {
		return 0, nil, err
	}
	return id, sigs, nil
}
