package pidns

import (
	"errors"
	"strconv"
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

// protocolErr returns an error that says what broke the protocol and wraps ErrProtocol.
func protocolErr(what string) error { return &protocolError{what} }

type protocolError struct{ what string }

func (e *protocolError) Error() string { return ErrProtocol.Error() + ": " + e.what }
func (e *protocolError) Unwrap() error { return ErrProtocol }

// itoa is strconv.Itoa for any integer, for messages.
func itoa[T ~int | ~uint32 | ~uint64 | ~int64](v T) string {
	if v < 0 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatUint(uint64(v), 10)
}

// An encoder appends a payload.
type encoder struct{ b []byte }

// Bytes returns the payload so far.
func (e *encoder) Bytes() []byte { return e.b }

func (e *encoder) U32(v uint32) {
	e.b = append(e.b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func (e *encoder) U64(v uint64) {
	e.U32(uint32(v))
	e.U32(uint32(v >> 32))
}

func (e *encoder) Str(s string) { e.U32(uint32(len(s))); e.b = append(e.b, s...) }

func (e *encoder) Strs(ss []string) {
	e.U32(uint32(len(ss)))
	for _, s := range ss {
		e.Str(s)
	}
}

// A decoder reads a payload; the first failure sticks, and every later read returns zero values.
type decoder struct {
	b   []byte
	err error
}

// newDecoder returns a decoder of payload.
func newDecoder(payload []byte) *decoder { return &decoder{b: payload} }

// Err returns the first failure.
func (d *decoder) Err() error { return d.err }

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = protocolErr("truncated or oversized " + what)
	}
}

// U32 reads a number; what names it in the error.
func (d *decoder) U32(what string) uint32 {
	if d.err != nil || len(d.b) < 4 {
		d.fail(what)
		return 0
	}
	v := uint32(d.b[0]) | uint32(d.b[1])<<8 | uint32(d.b[2])<<16 | uint32(d.b[3])<<24
	d.b = d.b[4:]
	return v
}

func (d *decoder) U64(what string) uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.fail(what)
		return 0
	}
	lo := d.U32(what)
	return uint64(lo) | uint64(d.U32(what))<<32
}

func (d *decoder) Str(what string) string {
	n := d.U32(what)
	if d.err != nil || uint64(n) > uint64(len(d.b)) {
		d.fail(what)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

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
		d.err = protocolErr(itoa(len(d.b)) + " bytes after the " + what)
	}
	return d.err
}
