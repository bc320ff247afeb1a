package reaper

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The working directory of a session persists across its foreground commands: each command's shell
// writes its final directory, as it exits, to a pipe that reaper reads once the shell has exited. A
// pipe, not a file: a file would have to live where the task may write (its user's), and whatever
// reaper read or wrote there as root the task could replace with a link, a FIFO or a device. The pipe
// is the child's descriptor cwdFD. Nothing waits on it: a process the command left behind may hold
// the write end for good, so reaper reads only what is there when the shell has exited, without
// blocking and at most maxCwdRead bytes, and keeps the last complete record (see cwdTail): what pwd
// printed, ended by a NUL, which no path holds (a newline may be part of a directory's name).

// cwdFD is the descriptor the shell's EXIT trap writes its directory to: high, so that a script's
// own redirections (exec 3>file, exec 9>lockfile) do not meet it.
const cwdFD = 97

// maxPath is the longest path the kernel resolves (PATH_MAX, its terminating NUL included).
const maxPath = 4096

// maxCwdRead bounds what is read from the pipe: a task may write into it too, and may have grown it
// (F_SETPIPE_SZ, up to 1 MiB for a user without privileges).
const maxCwdRead = 1 << 20

// cwdPipe makes a foreground command's working-directory pipe, non-blocking: the read end reaper's,
// the write end for the child (see shellScript). Where the trap opens the write end again through
// /dev/fd (dash can name no descriptor above 9), the kernel checks that open against the pipe's
// owner: with Options.User the pipe is given to that user.
func (r *Reaper) cwdPipe() (rd, wr *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, nil, err
	}
	if u := r.opts.User; u != nil {
		if err := unix.Fchown(p[1], int(u.Uid), int(u.Gid)); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, nil, err
		}
	}
	return os.NewFile(uintptr(p[0]), "cwd"), os.NewFile(uintptr(p[1]), "cwd"), nil
}

// readCwd returns the working directory a foreground command's shell wrote to its pipe as it exited.
// It reads what the pipe holds now, without waiting, at most maxCwdRead bytes, and takes the last
// complete record; ok is false when there is none that is a directory's path, or when there was more
// to read than that (the task wrote into the pipe itself).
func readCwd(f *os.File) (dir string, ok bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", false
	}
	var tail cwdTail
	full := false
	buf := make([]byte, 4096)
	rc.Control(func(fd uintptr) {
		for total := 0; ; {
			n, err := unix.Read(int(fd), buf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || n <= 0 {
				return // EAGAIN: nothing more now; EOF; or an error no retry fixes
			}
			tail.Write(buf[:n])
			if total += n; total > maxCwdRead {
				full = true
				return
			}
		}
	})
	if full {
		return "", false
	}
	return tail.dir()
}

// cwdTail keeps the last complete record (ended by a NUL) written to it that is at most maxPath
// bytes long, in bounded memory whatever is written.
type cwdTail struct {
	last    []byte // the last complete record
	ok      bool   // last is set
	partial []byte // the record being written
	long    bool   // the record being written is too long to be kept
}

// Write takes the next bytes of the stream.
func (c *cwdTail) Write(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if len(c.partial)+len(part) > maxPath {
			c.long, c.partial = true, c.partial[:0]
		} else if !c.long {
			c.partial = append(c.partial, part...)
		}
		if i < 0 {
			return
		}
		// A record too long to be a path still ends one: what came before it was not the last.
		c.last, c.ok = append(c.last[:0], c.partial...), !c.long
		c.partial, c.long = c.partial[:0], false
		b = b[i+1:]
	}
}

// dir returns the last complete record if it is a directory's path as pwd prints it, and nothing was
// written after it.
func (c *cwdTail) dir() (string, bool) {
	if !c.ok || len(c.partial) > 0 || c.long {
		return "", false
	}
	return parseCwd(c.last)
}

// lastCwd is readCwd's parsing of everything b holds (for tests and fuzzing).
func lastCwd(b []byte) (string, bool) {
	var c cwdTail
	c.Write(b)
	return c.dir()
}

// parseCwd returns the directory pwd printed in b: an absolute path without NUL that fits in
// PATH_MAX, its one trailing newline removed (a directory's name may end with newlines of its own).
func parseCwd(b []byte) (string, bool) {
	b, ok := bytes.CutSuffix(b, []byte{'\n'})
	if !ok || len(b) >= maxPath || bytes.IndexByte(b, 0) >= 0 || !filepath.IsAbs(string(b)) {
		return "", false
	}
	return string(b), true
}
