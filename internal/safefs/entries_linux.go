package safefs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Entry is a name in a directory and its type as the directory lists it. The type is a hint for
// skipping what is plainly not wanted: open what is wanted with OpenDir or ReadFile, which check.
type Entry struct {
	Name string
	// Dir reports an entry listed as a directory; Other one listed as anything but a directory or a
	// regular file (a link, a FIFO, a device, a socket). Neither is set for a regular file, or where
	// the file system does not say.
	Dir, Other bool
}

// maxEntries bounds what Entries lists when the caller gives no bound of its own.
const maxEntries = 1 << 16

// Entries lists the names in d, but "." and "..", at most max of them (max <= 0: 65536): a
// directory with more is refused with an error, so that a listing costs bounded memory. It lists
// through a descriptor of its own, so concurrent listings do not disturb each other.
func (d *Dir) Entries(max int) ([]Entry, error) {
	if max <= 0 {
		max = maxEntries
	}
	// "." is the directory itself: a new open file description, with an offset of its own.
	fd, err := unix.Openat(d.fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.path, Err: err}
	}
	defer unix.Close(fd)
	var out []Entry
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "list", Path: d.path, Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		if out = appendEntries(out, buf[:n]); len(out) > max {
			return nil, &fs.PathError{Op: "list", Path: d.path, Err: fmt.Errorf("more than %d entries", max)}
		}
	}
}

// appendEntries appends the entries of a getdents64 buffer, but "." and "..".
func appendEntries(out []Entry, b []byte) []Entry {
	// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16, d_type u8, d_name (NUL-ended).
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if s := string(name); s != "." && s != ".." && s != "" {
			typ := b[18]
			out = append(out, Entry{Name: s, Dir: typ == unix.DT_DIR, Other: typ != unix.DT_DIR && typ != unix.DT_REG && typ != unix.DT_UNKNOWN})
		}
		b = b[reclen:]
	}
	return out
}

// newFile wraps a directory descriptor.
func newFile(fd int, path string) *os.File { return os.NewFile(uintptr(fd), path) }
