package safefs

import (
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Files the operator names (a token file, a report): the path is trusted, links in it included, but
// what stands there may have been put there by someone who can write its directory.

// ReadConfig reads the file the operator named at path: through the links the path holds, but
// without blocking (a FIFO put in its place is refused, not waited on), only a regular file, and at
// most max bytes.
func ReadConfig(path string, max int64) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &fs.PathError{Op: "check", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, typeName(st.Mode))}
	}
	if st.Size > max {
		return nil, &fs.PathError{Op: "check", Path: path, Err: fmt.Errorf("%w (%d bytes; the limit is %d)", ErrTooLarge, st.Size, max)}
	}
	return readAll(fd, path, st.Size, max)
}

// ReplaceFile writes data to the file the operator named at path, with mode perm, in a directory
// others may write: a new file made there (O_CREAT|O_EXCL|O_NOFOLLOW) under a temporary name is
// renamed over path's last component, so nothing is written through a link or into a file someone
// else put there. Links among the directories of path are followed: those are the operator's.
func ReplaceFile(path string, data []byte, perm uint32) error {
	dir := filepath.Dir(path)
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dirfd)
	return replaceAt(dirfd, dir, filepath.Base(path), data, perm)
}
