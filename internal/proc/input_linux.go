package proc

import (
	"bytes"
	"strconv"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// Input is what a task reads its input from: a pipe, or a terminal. It is named as /proc shows
// another process's descriptor of it (readlink of /proc/<pid>/fd/<n>): "pipe:[<inode>]", or the
// terminal's path, "/dev/pts/<n>".
type Input struct {
	// Target is the link's target.
	Target string
	// TTY is the terminal's device number as the tty_nr field of /proc/<pid>/stat encodes it; zero
	// for a pipe. A process that reads /dev/tty reads this terminal when it is its controlling one.
	TTY uint64
}

// syscallInfo is what /proc/<pid>/syscall says of a process blocked in a system call.
type syscallInfo struct {
	nr   int64
	args [6]uint64
}

// ParseSyscall parses the contents of /proc/<pid>/syscall: "running", "-1 sp pc" (blocked but not
// in a system call), or the call's number and six arguments (decimal, then hexadecimal), the stack
// pointer and the program counter. ok is false unless the process is blocked in a system call.
func parseSyscall(b []byte) (sc syscallInfo, ok bool) {
	f := bytes.Fields(b)
	if len(f) < 7 {
		return sc, false
	}
	nr, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil || nr < 0 {
		return sc, false
	}
	sc.nr = nr
	for i := range sc.args {
		s, ok := bytes.CutPrefix(f[i+1], []byte("0x"))
		if !ok {
			return sc, false
		}
		if sc.args[i], err = strconv.ParseUint(string(s), 16, 64); err != nil {
			return sc, false
		}
	}
	return sc, true
}

// The system calls a process waits for input in, and which argument names the descriptor: for
// read(2) and its kin the descriptor itself; for select(2) and pselect6 the number of descriptors in
// the sets, whose last is taken to be the one waited for (the sets themselves are in the process's
// memory, which reaper does not read); for poll(2) and ppoll, with one descriptor only, standard
// input is taken to be it.
const (
	waitRead = iota + 1
	waitSelect
	waitPoll
)

// inputCall returns how system call nr waits for input (0: it does not).
func inputCall(nr int64) int {
	switch nr {
	case unix.SYS_READ, unix.SYS_READV, unix.SYS_PREAD64, unix.SYS_PREADV:
		return waitRead
	case unix.SYS_PSELECT6:
		return waitSelect
	case unix.SYS_PPOLL:
		return waitPoll
	}
	return archInputCall(nr)
}

// WaitsFor reports whether process pid is asleep (state S), blocked waiting to read in: in read(2) (or readv, pread64,
// preadv) on a descriptor of it, or in select(2), pselect6, poll(2) or ppoll for one (see
// inputCall for how far that is told). It reads /proc/<pid>/syscall, the targets of the
// descriptors it names and, for /dev/tty, the process's controlling terminal; a process that is gone,
// running, or that reaper may not inspect does not wait.
func (w *Walker) WaitsFor(pid int, in Input) bool {
	b, ok := w.read(pid, "/syscall", 0)
	if !ok {
		return false
	}
	sc, ok := parseSyscall(b)
	if !ok {
		return false
	}
	if st, ok := w.Stat(pid); !ok || st.State != 'S' {
		return false // woken (R), or stopped: not waiting
	}
	var fd uint64
	switch inputCall(sc.nr) {
	case waitRead:
		fd = sc.args[0]
	case waitSelect:
		if sc.args[0] == 0 || sc.args[0] > 1024 {
			return false
		}
		fd = sc.args[0] - 1
	case waitPoll:
		if sc.args[1] != 1 {
			return false
		}
		fd = 0
	default:
		return false
	}
	if fd > 1<<20 {
		return false
	}
	return w.fdIs(pid, int(fd), in)
}

// fdIs reports whether descriptor fd of process pid is in. The link is read, never followed: its
// target is not touched (a file on a file system that never answers cannot hold the read).
func (w *Walker) fdIs(pid, fd int, in Input) bool {
	w.path = strconv.AppendInt(append(strconv.AppendInt(append(w.path[:0], "/proc/"...), int64(pid), 10), "/fd/"...), int64(fd), 10)
	var buf [256]byte
	n, err := unix.Readlink(string(w.path), buf[:])
	if err != nil || n == len(buf) {
		return false
	}
	target := string(buf[:n])
	if target == in.Target {
		return true
	}
	if target != "/dev/tty" || in.TTY == 0 {
		return false
	}
	b, ok := w.read(pid, "/stat", 0)
	if !ok {
		return false
	}
	tty, ok := statField(b, 7)
	return ok && tty == in.TTY
}

// TTYNumber encodes a device number as the tty_nr field of /proc/<pid>/stat does.
func TTYNumber(rdev uint64) uint64 {
	major, minor := uint64(unix.Major(rdev)), uint64(unix.Minor(rdev))
	return minor&0xff | major<<8 | (minor&^0xff)<<12
}

// Switches returns how many times process pid has gone to sleep of its own accord
// (voluntary_ctxt_switches in /proc/<pid>/status): a process that was waiting for input and waits
// again has taken what it was given, and answered, if this changed in between. It does not use the
// walker's buffers.
func (w *Walker) Switches(pid int) (uint64, bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, false
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0, false
	}
	return st.VoluntaryCtxtSwitches, true
}
