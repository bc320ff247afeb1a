package tty

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cgreaper/reaper/internal/proc"
	"golang.org/x/sys/unix"
)

// Size is the size of a terminal, in characters.
type Size struct {
	Rows, Cols uint16
}

// The size of a terminal a caller does not size.
const (
	DefaultRows = 24
	DefaultCols = 80
)

// Open opens a pseudo-terminal of size in the host's devpts instance, through /dev/ptmx: the master,
// non-blocking and close-on-exec, is the caller's; the other side is the task's. With uid at least 0
// the task's side is given to that user, as a login gives a terminal to whoever logs in (programs
// that reopen their terminal by its name need that); a negative uid leaves it root's.
func Open(size Size, uid int) (master, tty *os.File, id proc.Input, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, id, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	return open(m, size, uid)
}

// OpenIn is Open in the devpts instance whose root devpts is (an O_PATH descriptor of a session's
// /dev/pts, see pidns.Init.Devpts): through its own ptmx, opened relative to that descriptor, never
// by a path of the host's, without crossing a mount point or following a link (a root task of the
// session could mount over its /dev/pts/ptmx), and checked to be that instance's ptmx device.
func OpenIn(devpts *os.File, size Size, uid int) (master, tty *os.File, id proc.Input, err error) {
	const flags = unix.O_RDWR | unix.O_NOCTTY | unix.O_CLOEXEC | unix.O_NONBLOCK
	dir := int(devpts.Fd())
	m, err := unix.Openat2(dir, "ptmx", &unix.OpenHow{Flags: flags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		m, err = unix.Openat(dir, "ptmx", flags|unix.O_NOFOLLOW, 0) // a kernel before 5.6, or a seccomp profile
	}
	if err != nil {
		return nil, nil, id, fmt.Errorf("open ptmx of the session's devpts: %w", err)
	}
	var st, root unix.Stat_t
	if err := unix.Fstat(m, &st); err != nil || unix.Fstat(dir, &root) != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 5 || unix.Minor(st.Rdev) != 2 || st.Dev != root.Dev {
		unix.Close(m)
		return nil, nil, id, errors.New("open ptmx of the session's devpts: not the instance's ptmx device")
	}
	return open(m, size, uid)
}

// open makes the terminal of the multiplexer m, which it owns: unlocked, sized, its other side
// opened from it (TIOCGPTPEER, no path) and given to uid.
func open(m int, size Size, uid int) (master, tty *os.File, id proc.Input, err error) {
	fail := func(what string, err error) (*os.File, *os.File, proc.Input, error) {
		unix.Close(m)
		return nil, nil, id, fmt.Errorf("terminal: %s: %w", what, err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlock", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		return fail("number", err)
	}
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return fail("open the other side (TIOCGPTPEER)", errno)
	}
	slave := int(s)
	if err := unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols}); err != nil {
		unix.Close(slave)
		return fail("set its size", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(slave, &st); err != nil {
		unix.Close(slave)
		return fail("stat", err)
	}
	if uid >= 0 {
		if err := unix.Fchown(slave, uid, -1); err != nil {
			unix.Close(slave)
			return fail("give it to the user", err)
		}
	}
	id = proc.Input{Target: "/dev/pts/" + strconv.Itoa(n), TTY: proc.TTYNumber(st.Rdev)}
	return os.NewFile(uintptr(m), "ptmx"), os.NewFile(uintptr(slave), id.Target), id, nil
}

// Pipe makes a pipe for a task's standard input: the read end, blocking, for the task; the write
// end, non-blocking (in the runtime's poller, so that writes can have a deadline), the caller's.
func Pipe() (rd, wr *os.File, id proc.Input, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, id, fmt.Errorf("input pipe: %w", err)
	}
	var st unix.Stat_t
	err = unix.Fstat(p[0], &st)
	if err == nil {
		err = unix.SetNonblock(p[1], true)
	}
	if err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, nil, id, fmt.Errorf("input pipe: %w", err)
	}
	id = proc.Input{Target: "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"}
	return os.NewFile(uintptr(p[0]), "stdin"), os.NewFile(uintptr(p[1]), "stdin"), id, nil
}
