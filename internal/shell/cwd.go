package shell

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxPath is the longest path the kernel resolves (PATH_MAX, its terminating NUL included).
const maxPath = 4096

// maxCwdRead bounds what is read from the pipe: a task may write into it too, and may have grown it
// (F_SETPIPE_SZ, up to 1 MiB for a user without privileges).
const maxCwdRead = 1 << 20

// ReadCwd returns the working directory a foreground command's shell wrote to its pipe as it exited.
// It reads what the pipe holds now, without waiting, at most maxCwdRead bytes, and takes the last
// complete record; ok is false when there is none that is a directory's path, or when there was more
// to read than that (the task wrote into the pipe itself).
func ReadCwd(f *os.File) (dir string, ok bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", false
	}
	var tail cwdTail
	total := 0
	buf := make([]byte, 4096)
	rc.Control(func(fd uintptr) {
		for total <= maxCwdRead {
			n, err := unix.Read(int(fd), buf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || n <= 0 {
				return // EAGAIN: nothing more now; EOF; or an error no retry fixes
			}
			tail.Write(buf[:n])
			total += n
		}
	})
	if total > maxCwdRead {
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

// dir returns the last complete record if nothing was written after it and it is a directory's path
// as pwd prints it: an absolute path without NUL that fits in PATH_MAX, its one trailing newline
// removed (a directory's name may end with newlines of its own).
func (c *cwdTail) dir() (string, bool) {
	b, nl := bytes.CutSuffix(c.last, []byte{'\n'})
	if !c.ok || len(c.partial) > 0 || c.long || !nl || len(b) >= maxPath || bytes.IndexByte(b, 0) >= 0 ||
		!filepath.IsAbs(string(b)) {
		return "", false
	}
	return string(b), true
}
