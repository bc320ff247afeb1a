package safefs

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// ReadFile returns the contents of the regular file name in d, at most max bytes. The name is first
// opened with O_PATH, which opens nothing (no FIFO blocks, no device driver runs), and checked with
// fstat: a regular file owned by d's user, not writable by group or others, with one link and at most
// max bytes. Only then is it opened for reading, and refused if that open found another file. A file
// that grows past max while it is read is refused too.
func (d *Dir) ReadFile(name string, max int64) ([]byte, error) {
	f, size, err := d.openChecked(name, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(int(f.Fd()), f.Name(), size, max)
}

// OpenFile opens the regular file name in d for reading, checked as ReadFile checks it (at most max
// bytes when it is opened; max < 0: any size). The file is the caller's to read and close.
func (d *Dir) OpenFile(name string, max int64) (*os.File, error) {
	f, _, err := d.openChecked(name, max)
	return f, err
}

// openChecked opens name for reading after the checks of ReadFile, and returns its size.
func (d *Dir) openChecked(name string, max int64) (*os.File, int64, error) {
	p := d.Join(name)
	pfd, err := openat(d.fd(), name, unix.O_PATH, 0)
	if err != nil {
		return nil, 0, pathError("open", p, err)
	}
	var want unix.Stat_t
	err = unix.Fstat(pfd, &want)
	unix.Close(pfd)
	if err != nil {
		return nil, 0, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if err := check(&want, p, d.uid, unix.S_IFREG, max); err != nil {
		return nil, 0, err
	}
	fd, err := openat(d.fd(), name, unix.O_RDONLY, 0)
	if err != nil {
		return nil, 0, pathError("open", p, err)
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		unix.Close(fd)
		return nil, 0, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		unix.Close(fd)
		return nil, 0, &fs.PathError{Op: "open", Path: p, Err: errors.New("replaced while it was opened")}
	}
	return blockingFile(fd, p), got.Size, nil
}

// CreateFile makes the file name in d, which must not exist (O_CREAT|O_EXCL: nothing that exists is
// opened, a link included), with mode perm, open for reading and writing. The file is the caller's to
// write and close.
func (d *Dir) CreateFile(name string, perm uint32) (*os.File, error) {
	p := d.Join(name)
	fd, err := openat(d.fd(), name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, perm)
	if err != nil {
		return nil, pathError("create", p, err)
	}
	if err := unix.Fchmod(fd, perm); err != nil { // the umask's bits back
		unix.Close(fd)
		unix.Unlinkat(d.fd(), name, 0)
		return nil, &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	return blockingFile(fd, p), nil
}

// blockingFile wraps fd, opened O_NONBLOCK (which means nothing for a regular file), as a file of
// blocking reads and writes that the runtime's poller does not try to take.
func blockingFile(fd int, p string) *os.File {
	unix.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), p)
}

// readAll reads fd to its end, refusing more than max bytes.
func readAll(fd int, p string, size, max int64) ([]byte, error) {
	b := make([]byte, 0, min(size, max)+1)
	for {
		if len(b) == cap(b) {
			if int64(len(b)) > max {
				return nil, &fs.PathError{Op: "read", Path: p, Err: fmt.Errorf("%w (%d bytes)", ErrTooLarge, max)}
			}
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):min(int64(cap(b)), max+1)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: p, Err: err}
		case n == 0:
			if int64(len(b)) > max {
				return nil, &fs.PathError{Op: "read", Path: p, Err: fmt.Errorf("%w (%d bytes)", ErrTooLarge, max)}
			}
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// WriteFile replaces the file name in d with data (mode 0600): it writes a new file under a temporary
// name (created with O_CREAT|O_EXCL, so nothing that already exists is opened) and renames it over
// name. A reader sees the old file or the new one, never half of one; nothing is written through a
// link or into a file that someone else made.
func (d *Dir) WriteFile(name string, data []byte) error {
	return replaceAt(d.fd(), d.path, name, data, 0o600)
}

// replaceAt is WriteFile in the directory dirfd (at dirPath, for errors) with mode perm.
func replaceAt(dirfd int, dirPath, name string, data []byte, perm uint32) error {
	p := filepath.Join(dirPath, name)
	if err := checkName(name); err != nil {
		return &fs.PathError{Op: "write", Path: p, Err: err}
	}
	tmp := "." + name + "." + randomSuffix()
	fd, err := openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, perm)
	if err != nil {
		return pathError("create", filepath.Join(dirPath, tmp), err)
	}
	err = writeAll(fd, data)
	if err == nil {
		err = unix.Fchmod(fd, perm) // the umask's bits back
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, name)
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return &fs.PathError{Op: "write", Path: p, Err: err}
	}
	return nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func randomSuffix() string {
	var b [8]byte
	rand.Read(b[:])
	return strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 36)
}

// Remove removes the file (or empty directory) name from d; one that is gone already is not an
// error.
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return &fs.PathError{Op: "remove", Path: d.Join(name), Err: err}
	}
	err := unix.Unlinkat(d.fd(), name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(d.fd(), name, unix.AT_REMOVEDIR)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "remove", Path: d.Join(name), Err: err}
	}
	return nil
}

// maxRemoveDepth bounds how deep RemoveAll descends: reaper's own state is two levels deep.
const maxRemoveDepth = 8

// RemoveAll removes name from d with everything below it, relative to descriptors: a link is removed,
// never followed, and a directory on another file system (a mount point) is refused, not emptied. One
// that is gone already is not an error.
func (d *Dir) RemoveAll(name string) error {
	return d.removeAll(name, maxRemoveDepth)
}

func (d *Dir) removeAll(name string, depth int) error {
	p := d.Join(name)
	if err := checkName(name); err != nil {
		return &fs.PathError{Op: "remove", Path: p, Err: err}
	}
	err := unix.Unlinkat(d.fd(), name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return &fs.PathError{Op: "remove", Path: p, Err: err}
	}
	if depth == 0 {
		return &fs.PathError{Op: "remove", Path: p, Err: errors.New("too deep")}
	}
	fd, err := openat(d.fd(), name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // removed meanwhile, by another removal of it
	}
	if err != nil {
		return pathError("open", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != d.dev {
		unix.Close(fd)
		return &fs.PathError{Op: "remove", Path: p, Err: errors.New("on another file system (a mount point): left alone")}
	}
	sub := &Dir{f: newFile(fd, p), path: p, uid: d.uid, dev: d.dev}
	entries, err := sub.Entries(maxEntries)
	var errs []error
	if err != nil && !errors.Is(err, unix.ENOENT) { // ENOENT: removed since it was opened
		errs = append(errs, err)
	}
	for _, e := range entries {
		errs = append(errs, sub.removeAll(e.Name, depth-1))
	}
	sub.Close()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd(), name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}
