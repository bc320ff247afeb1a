package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cgreaper/reaper/internal/spare"
	"golang.org/x/sys/unix"
)

// pfKthread is PF_KTHREAD: a kernel thread, which has no memory of its own, so no environment.
const pfKthread = 0x00200000

// Walker reads /proc with raw system calls (see the package doc for why not procfs). It reuses its
// buffers, so one Walker must not be used concurrently; make one per goroutine with [NewWalker].
type Walker struct {
	buf  []byte
	path []byte
	// spare, if set, lends a descriptor to a read the descriptor limit refused (see Spare).
	spare *spare.Reserve
	// starved is set when a read was refused by the descriptor limit even so: what it read as gone
	// may live (see Starved).
	starved bool
}

// NewWalker returns a Walker with a page-sized buffer.
func NewWalker() *Walker {
	return &Walker{buf: make([]byte, 4096), path: make([]byte, 0, 64)}
}

// Spare has the walker's reads, and the handles it opens, take a descriptor from r where the
// descriptor limit refuses one (a teardown's walker: see package spare). It returns w.
func (w *Walker) Spare(r *spare.Reserve) *Walker {
	w.spare = r
	return w
}

// ErrStarved is wrapped by the errors of walks and waits that could not read a file of /proc or open a
// pidfd because the descriptor limits refused it, the reserve's spares too: what they found is not all
// there is, and what they took for gone may live. The caller tries again (a descriptor frees when
// anything of the process closes one).
var ErrStarved = errors.New("refused a descriptor by the limit on open files")

// Starved returns ErrStarved if a read since the last call was refused a descriptor, and forgets it.
func (w *Walker) Starved() error {
	if !w.starved {
		return nil
	}
	w.starved = false
	return ErrStarved
}

// open opens a file of /proc for reading, through the walker's reserve where the limit refuses it,
// and records a refusal even so (see Starved).
func (w *Walker) open(dir int, name string, flags int) (int, error) {
	fd, err := w.spare.Open(func() (int, error) { return unix.Openat(dir, name, flags|unix.O_CLOEXEC, 0) })
	w.starved = w.starved || spare.Limited(err)
	return fd, err
}

// close closes a descriptor open opened, and lets the reserve take its slot back.
func (w *Walker) close(fd int) { w.spare.Close(fd) }

// Stat reads one process's stat; ok is false if it is gone.
func (w *Walker) Stat(pid int) (st Stat, ok bool) {
	b, ok := w.read(pid, "/stat", 0)
	if !ok {
		return Stat{}, false
	}
	return ParseStat(pid, b)
}

// look is Stat, and whether the read was refused a descriptor (then ok is false, and the process may
// live).
func (w *Walker) look(pid int) (st Stat, ok, starved bool) {
	before := w.starved
	w.starved = false
	st, ok = w.Stat(pid)
	starved = w.starved
	w.starved = before || starved
	return st, ok, starved
}

// statField returns the unsigned field n (numbered as in proc(5), n > 3) of the contents of
// /proc/<pid>/stat.
func statField(b []byte, n int) (uint64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	f := bytes.Split(bytes.TrimSuffix(b[i+2:], []byte{'\n'}), []byte{' '}) // f[0] is field 3; the kernel puts one space between fields
	if n < 4 || n-3 >= len(f) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(f[n-3]), 10, 64)
	return v, err == nil
}

// Snapshot returns the stat of every process in /proc but those in skip, whose stat it does not read.
func (w *Walker) Snapshot(skip map[int]bool) ([]Stat, error) {
	names, err := w.names(unix.AT_FDCWD, "/proc")
	if err != nil {
		return nil, err
	}
	out := make([]Stat, 0, len(names))
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil || skip[pid] {
			continue
		}
		if st, ok := w.Stat(pid); ok {
			out = append(out, st)
		}
	}
	return out, nil
}

// read reads /proc/<pid><file> into the walker's buffer until the file ends or the buffer, full,
// holds max bytes or more (so at least what the buffer holds: a page at first), growing the buffer as
// it fills. With max 0 it reads the whole file, however long: the kernel makes it, and a children
// file holds as many pids as the process has children, all of which a walk needs.
func (w *Walker) read(pid int, file string, max int) ([]byte, bool) {
	w.path = append(strconv.AppendInt(append(w.path[:0], "/proc/"...), int64(pid), 10), file...)
	return w.readAt(unix.AT_FDCWD, string(w.path), max)
}

// readAt reads the file name, relative to the directory dir, as read does.
func (w *Walker) readAt(dir int, name string, max int) ([]byte, bool) {
	fd, err := w.open(dir, name, unix.O_RDONLY)
	if err != nil {
		return nil, false
	}
	defer w.close(fd)
	n := 0
	for {
		k, err := unix.Read(fd, w.buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, false
		}
		if k == 0 {
			return w.buf[:n], true
		}
		n += k
		if n == len(w.buf) {
			if max > 0 && n >= max {
				return w.buf[:n], true
			}
			w.buf = append(w.buf, make([]byte, len(w.buf))...)
		}
	}
}

// names lists the entries of the directory name below dir (but "." and ".."), through the walker's
// reserve where the descriptor limit refuses a descriptor.
func (w *Walker) names(dir int, name string) ([]string, error) {
	fd, err := w.open(dir, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	f.Close()
	w.spare.Refill()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return names, nil
}
