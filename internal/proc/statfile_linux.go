package proc

import (
	"bytes"
	"strconv"

	"golang.org/x/sys/unix"
)

// Stat is what reaper needs from /proc/<pid>/stat.
type Stat struct {
	Pid, PPid int
	// Pgid and Sid are the process group and session (fields 5 and 6).
	Pgid, Sid int
	// Flags are the kernel's PF_* flags (field 9); see [Stat.Exiting].
	Flags uint64
	// Threads is the number of threads (field 20).
	Threads int
	// Start is the start time in clock ticks since boot (field 22); with Pid, a process's identity.
	Start uint64
	// State is 'R', 'S', 'D', 'T', 'Z' and so on (field 3).
	State byte
}

// pfExiting is PF_EXITING: the process is inside do_exit.
const pfExiting = 0x4

// Exiting reports whether the process is past the point of no return in do_exit: a killed process
// leaves its cgroup there, after its memory and files are released but before it becomes a zombie, so
// for a moment it shows state R although it never runs user code again.
func (s Stat) Exiting() bool { return s.Flags&pfExiting != 0 }

// Dead reports whether the process has stopped running for good: a zombie, or exiting, with no other
// thread left. What stat shows is its main thread's: one that exited alone (pthread_exit in main, or
// exit rather than exit_group) shows state Z and PF_EXITING while the process's other threads run on,
// fork and hold its children, and only Threads, which counts the zombie too, tells it apart.
func (s Stat) Dead() bool { return (s.State == 'Z' || s.Exiting()) && s.Threads <= 1 }

// ReadStat reads and parses /proc/<pid>/stat, or the file name below the directory descriptor dir if
// dir is not -1 (a /proc opened elsewhere, name "<pid>/stat"); ok is false if the process is gone.
func ReadStat(dir int, name string, pid int) (st Stat, ok bool) {
	var buf [1024]byte // the fields Parse reads come within the first few hundred bytes
	b, ok := ReadAt(dir, name, buf[:])
	if !ok {
		return Stat{}, false
	}
	return ParseStat(pid, b)
}

// ParseStat parses the contents of /proc/<pid>/stat. The command name (field 2) may itself contain
// spaces and ')', so parsing starts after the last ')'.
func ParseStat(pid int, b []byte) (Stat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Stat{}, false
	}
	st := Stat{Pid: pid, State: b[i+2]}
	field := 3 // b[i+2] is field 3 (state)
	var v uint64
	for _, c := range b[i+3:] {
		switch {
		case c == ' ':
			switch field {
			case 4:
				st.PPid = int(v)
			case 5:
				st.Pgid = int(v)
			case 6:
				st.Sid = int(v)
			case 9:
				st.Flags = v
			case 20:
				st.Threads = int(v)
			case 22:
				st.Start = v
				return st, true
			}
			field++
			v = 0
		case c == '-':
			// tty_pgrp (field 8) is -1 without a terminal; no field kept here is negative.
		case c >= '0' && c <= '9':
			v = v*10 + uint64(c-'0')
		default:
			return Stat{}, false
		}
	}
	return Stat{}, false
}

// FdinfoPid returns the "Pid:" of a pidfd's fdinfo: the pid in the namespace of the /proc it was read
// through, -1 once the process has been reaped, 0 if it cannot be seen from there.
func FdinfoPid(b []byte) int {
	v, _ := lineValue(b, "Pid")
	n, _ := strconv.Atoi(string(v))
	return n
}

// lineValue returns the value of the first "key:" line of a status or fdinfo file, trimmed.
func lineValue(b []byte, key string) ([]byte, bool) {
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte(key+":")); ok {
			return bytes.TrimSpace(v), true
		}
	}
	return nil, false
}

// ReadAt reads what fits of a small file into buf: name below the directory descriptor dir, or the
// path name if dir is -1. ok is false if it cannot be opened or read (the process is gone), or is not
// a regular file: a /proc a task mounted over (the init's namespace shares its mounts with its tasks)
// may hold a link, a FIFO or a device there, and none is followed, waited on or read.
func ReadAt(dir int, name string, buf []byte) (b []byte, ok bool) {
	if dir < 0 {
		dir = unix.AT_FDCWD
	}
	var fd int
	var err error
	for {
		fd, err = unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, false
	}
	n := 0
	for n < len(buf) {
		k, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if k == 0 {
			break
		}
		n += k
	}
	return buf[:n], true
}
