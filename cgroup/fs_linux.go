package cgroup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cgreaper/reaper/internal/spare"
	"golang.org/x/sys/unix"
)

// Reading and writing cgroupfs. Teardown lists a slice's processes and directories several times and
// every system call into cgroupfs counts there (15-90 µs each on a cold cache), so these use open,
// read and close only: no os.File (an extra fstat and the poller), no scanner, no string per pid.

// openFile opens a cgroupfs file, through r where the descriptor limit refuses a descriptor (a
// teardown's slice: see Slice.Spare); nil lends none. closeFile closes what it opened.
func openFile(r Reserve, file string, flags int) (int, error) {
	fd, err := unix.Open(file, flags|unix.O_CLOEXEC, 0)
	if r != nil && spare.Limited(err) {
		fd, err = r.Open(func() (int, error) { return unix.Open(file, flags|unix.O_CLOEXEC, 0) })
	}
	return fd, err
}

func closeFile(r Reserve, fd int) {
	if r == nil {
		unix.Close(fd)
		return
	}
	r.Close(fd)
}

// writeFile writes a value into a cgroup interface file, carrying the path in the error.
func writeFile(r Reserve, dir, name, value string) error {
	file := filepath.Join(dir, name)
	fd, err := openFile(r, file, unix.O_WRONLY)
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, file, &os.PathError{Op: "open", Path: file, Err: err})
	}
	defer closeFile(r, fd)
	for {
		_, err = unix.Write(fd, []byte(value))
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, file, &os.PathError{Op: "write", Path: file, Err: err})
	}
	return nil
}

// readSmall reads a whole cgroupfs file with open, read and close only, through r (see openFile).
func readSmall(r Reserve, file string) ([]byte, error) {
	fd, err := openFile(r, file, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer closeFile(r, fd)
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// readParsed reads a whole cgroupfs file through r (see openFile) and parses it; the error names the
// file.
func readParsed[T any](r Reserve, file string, parse func([]byte) (T, error)) (T, error) {
	var v T
	b, err := readSmall(r, file)
	if err == nil {
		v, err = parse(b)
	}
	if err != nil {
		return v, fmt.Errorf("read %s: %w", file, err)
	}
	return v, nil
}

// readFields returns the whitespace-separated words of a small file.
func readFields(path string) ([]string, error) {
	return readParsed(nil, path, func(b []byte) ([]string, error) { return strings.Fields(string(b)), nil })
}

// readPids appends the pids listed in a cgroup.procs file (or the tids in a cgroup.threads file) to
// dst. Pids of other pid namespaces read as 0 and are skipped. A file that is gone (the cgroup was
// removed) lists nothing.
func readPids(r Reserve, file string, dst []int) ([]int, error) {
	b, err := readSmall(r, file)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		return dst, nil
	}
	if err != nil {
		return dst, fmt.Errorf("read %s: %w", file, err)
	}
	return parsePids(b, dst), nil
}

// maxPid is the largest pid the kernel hands out (PID_MAX_LIMIT).
const maxPid = 1 << 22

// parsePids appends the numbers of a cgroup.procs or cgroup.threads file, one per line, to dst;
// zeros (pids of other pid namespaces) are skipped, and so is a line that is no pid at all.
func parsePids(b []byte, dst []int) []int {
	pid, bad := 0, false
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			pid = pid*10 + int(c-'0')
			bad = bad || pid > maxPid
		case c == '\n':
			if pid > 0 && !bad {
				dst = append(dst, pid)
			}
			pid, bad = 0, false
		default:
			bad = true
		}
	}
	if pid > 0 && !bad {
		dst = append(dst, pid)
	}
	return dst
}

// childDirs lists the subdirectories (child cgroups) of dir, sorted. It calls getdents64 itself
// rather than os.ReadDir, which costs an extra fstat per directory. A directory that is gone has no
// children.
func childDirs(r Reserve, dir string) ([]string, error) {
	fd, err := openFile(r, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	defer closeFile(r, fd)
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ENOENT) {
			return nil, nil // removed while listed
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
		if n <= 0 {
			break
		}
		names = appendDirs(names, buf[:n])
	}
	slices.Sort(names)
	return names, nil
}

// appendDirs appends the names of the directories in a getdents64 buffer, but "." and "..".
func appendDirs(names []string, b []byte) []string {
	// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16, d_type u8, d_name (NUL-ended).
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		if b[18] == unix.DT_DIR {
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if s := string(name); s != "." && s != ".." {
				names = append(names, s)
			}
		}
		b = b[reclen:]
	}
	return names
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
