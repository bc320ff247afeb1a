package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The causes of a refusal, wrapped in an *fs.PathError.
var (
	ErrSymlink    = errors.New("is a symbolic link")
	ErrNotRegular = errors.New("not a regular file")
	ErrNotDir     = errors.New("not a directory")
	ErrOwner      = errors.New("owned by another user")
	ErrWritable   = errors.New("writable by others")
	ErrLinked     = errors.New("has more than one link")
	ErrTooLarge   = errors.New("larger than the limit")
)

// Dir is a directory reaper owns, held open by descriptor. Its methods are safe for concurrent use;
// Close must come after every other call has returned.
type Dir struct {
	f    *os.File // O_RDONLY|O_DIRECTORY
	path string   // for errors and listings only: no name is ever resolved through it
	uid  int      // the owner expected of the directory and everything read below it
	dev  uint64   // the directory's device: RemoveAll never crosses into another
}

// OpenRoot opens the directory at path (absolute), which must exist, as the top of reaper's state. It
// walks path from "/" one component at a time, relative to descriptors, and checks each directory on
// the way with fstat: every ancestor owned by root or this process's effective user and not writable
// by group or others unless sticky (as /tmp), and path itself owned by this user and not writable by
// group or others. A symbolic link among the ancestors is followed only if root or this user owns
// it; path itself must not be one. A directory that fails is refused with an error naming it and why.
func OpenRoot(path string) (*Dir, error) {
	return walkRoot(path, false)
}

// CreateRoot is OpenRoot, but makes path's last component (mode 0700) if it does not exist; its
// parent must exist.
func CreateRoot(path string) (*Dir, error) {
	return walkRoot(path, true)
}

// maxLinks bounds the links walkRoot follows, as the kernel's own path walk does (40).
const maxLinks = 40

// walkRoot opens path from "/" down, checking each directory; with create it makes the last
// component when missing.
func walkRoot(path string, create bool) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, &fs.PathError{Op: "open", Path: path, Err: errors.New("not an absolute path")}
	}
	uid := os.Geteuid()
	w := &rootWalk{uid: uid, fd: -1}
	defer w.close()
	if err := w.restart(); err != nil {
		return nil, err
	}
	names := splitPath(path)
	for links := 0; len(names) > 0; {
		name, last := names[0], len(names) == 1
		names = names[1:]
		if err := checkAncestor(w.fd, w.at, uid); err != nil {
			return nil, err
		}
		target, err := w.step(name, last, create)
		if err != nil {
			return nil, err
		}
		if target == "" {
			continue
		}
		if links++; links > maxLinks {
			return nil, &fs.PathError{Op: "open", Path: path, Err: unix.ELOOP}
		}
		if filepath.IsAbs(target) {
			if err := w.restart(); err != nil {
				return nil, err
			}
		}
		names = append(splitPath(target), names...)
	}
	st, err := checkDir(w.fd, w.at, uid)
	if err != nil {
		return nil, err
	}
	d := &Dir{f: newFile(w.fd, w.at), path: w.at, uid: uid, dev: st.Dev}
	w.fd = -1 // the Dir's now
	return d, nil
}

// rootWalk is walkRoot's position: the directory reached so far.
type rootWalk struct {
	uid int
	fd  int
	at  string
}

func (w *rootWalk) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
	}
}

// restart goes back to "/".
func (w *rootWalk) restart() error {
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: "/", Err: err}
	}
	w.close()
	w.fd, w.at = fd, "/"
	return nil
}

// step moves into name, or returns the target of the link name is (only among the ancestors, and
// only a link root or this user owns). The last component is made if missing when create is set.
func (w *rootWalk) step(name string, last, create bool) (target string, err error) {
	next := filepath.Join(w.at, name)
	var fd int
	if name == ".." {
		fd, err = unix.Openat(w.fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	} else {
		fd, err = openat(w.fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if last && create && errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(w.fd, name, 0o700); err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = openat(w.fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			}
		}
	}
	err = dirError(w.fd, name, err)
	if errors.Is(err, ErrSymlink) && !last {
		return w.readLink(name, next)
	}
	if err != nil {
		return "", pathError("open", next, err)
	}
	unix.Close(w.fd)
	w.fd, w.at = fd, next
	return "", nil
}

// readLink returns the target of the link name, if root or this user owns it.
func (w *rootWalk) readLink(name, path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(w.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Uid != 0 && int(st.Uid) != w.uid {
		return "", &fs.PathError{Op: "check", Path: path, Err: fmt.Errorf("%w owned by another user (uid %d)", ErrSymlink, st.Uid)}
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(w.fd, name, buf)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: path, Err: err}
	}
	return string(buf[:n]), nil
}

// splitPath returns the names of path, "." dropped.
func splitPath(path string) []string {
	var out []string
	for _, s := range strings.Split(path, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

// checkAncestor refuses a directory above the state that someone other than root and uid could
// change: one owned by another user, or writable by group or others without the sticky bit (which
// keeps them from renaming or removing what they do not own).
func checkAncestor(fd int, path string, uid int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	switch {
	case st.Uid != 0 && int(st.Uid) != uid:
		return &fs.PathError{Op: "check", Path: path, Err: fmt.Errorf("%w (uid %d; want root or uid %d)", ErrOwner, st.Uid, uid)}
	case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
		return &fs.PathError{Op: "check", Path: path, Err: fmt.Errorf("%w (mode %04o, not sticky)", ErrWritable, st.Mode&0o7777)}
	}
	return nil
}

// checkDir refuses what is not a directory owned by uid that only its owner may write.
func checkDir(fd int, path string, uid int) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return st, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return st, check(&st, path, uid, unix.S_IFDIR, 0)
}

// check refuses what is not of type typ (unix.S_IFDIR or unix.S_IFREG), owned by uid, that only its
// owner may write; and a regular file with more than one link or more than max bytes (max < 0: any
// size).
func check(st *unix.Stat_t, path string, uid int, typ uint32, max int64) error {
	var err error
	reg := typ == unix.S_IFREG
	switch {
	case reg && st.Mode&unix.S_IFMT == unix.S_IFLNK:
		err = ErrSymlink // O_PATH|O_NOFOLLOW opens the link itself (without openat2)
	case !reg && st.Mode&unix.S_IFMT != typ:
		err = fmt.Errorf("%w (%s)", ErrNotDir, typeName(st.Mode))
	case st.Mode&unix.S_IFMT != typ:
		err = fmt.Errorf("%w (%s)", ErrNotRegular, typeName(st.Mode))
	case int(st.Uid) != uid:
		err = fmt.Errorf("%w (uid %d; want %d)", ErrOwner, st.Uid, uid)
	case st.Mode&0o022 != 0:
		err = fmt.Errorf("%w (mode %04o)", ErrWritable, st.Mode&0o7777)
	case reg && st.Nlink != 1:
		err = fmt.Errorf("%w (%d)", ErrLinked, st.Nlink)
	case reg && max >= 0 && st.Size > max:
		err = fmt.Errorf("%w (%d bytes; the limit is %d)", ErrTooLarge, st.Size, max)
	}
	if err != nil {
		return &fs.PathError{Op: "check", Path: path, Err: err}
	}
	return nil
}

// typeName names a file type for errors.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return fmt.Sprintf("type %#o", mode&unix.S_IFMT)
}

// openFlags go with every open: never follow a link in the last component, never block (a FIFO opens
// at once and is then refused), never leak into a child.
const openFlags = unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

// openat opens name (one component) relative to dirfd with openFlags, through openat2 so that no link
// and no magic link is followed and nothing outside dirfd is reached, or through openat with
// O_NOFOLLOW where openat2 is refused (ENOSYS: a kernel before 5.6; EPERM: a seccomp profile). For one
// component both mean the same.
func openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	if err := checkName(name); err != nil {
		return -1, err
	}
	if flags&unix.O_PATH != 0 {
		flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC // openat2 refuses O_PATH with any other flag
	} else {
		flags |= openFlags
	}
	how := unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flags&unix.O_CREAT != 0 {
		how.Mode = uint64(mode)
	}
	for {
		fd, err := unix.Openat2(dirfd, name, &how)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		default:
			return fd, err
		}
		break
	}
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// dirError names the cause of a failed open of name as a directory: a link, or not a directory
// (with O_DIRECTORY the kernel answers ENOTDIR for both, where O_NOFOLLOW alone says ELOOP).
func dirError(dirfd int, name string, err error) error {
	if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return ErrSymlink
	}
	return fmt.Errorf("%w (%s)", ErrNotDir, typeName(st.Mode))
}

// checkName refuses anything but one path component.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%q is not a file name", name)
	}
	return nil
}

// pathError wraps err for path, naming a link in the last component as ErrSymlink (the kernel says
// ELOOP).
func pathError(op, path string, err error) error {
	if errors.Is(err, unix.ELOOP) {
		err = ErrSymlink
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// Path returns the directory's path, for messages and listings.
func (d *Dir) Path() string { return d.path }

// Join returns the path of name in the directory, for messages and listings.
func (d *Dir) Join(name string) string { return filepath.Join(d.path, name) }

// Close closes the directory's descriptor. It is idempotent.
func (d *Dir) Close() error {
	err := d.f.Close()
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}

// fd returns the directory's descriptor (-1 once closed: every call then fails with EBADF).
func (d *Dir) fd() int { return int(d.f.Fd()) }

// Mkdir makes the directory name (mode 0700) in d.
func (d *Dir) Mkdir(name string) error {
	if err := checkName(name); err != nil {
		return &fs.PathError{Op: "mkdir", Path: d.Join(name), Err: err}
	}
	if err := unix.Mkdirat(d.fd(), name, 0o700); err != nil {
		return &fs.PathError{Op: "mkdir", Path: d.Join(name), Err: err}
	}
	return nil
}

// OpenDir opens the directory name in d, refusing a link, anything but a directory, and a directory
// not owned by d's user or writable by others.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	p := d.Join(name)
	fd, err := openat(d.fd(), name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, pathError("open", p, dirError(d.fd(), name, err))
	}
	st, err := checkDir(fd, p, d.uid)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Dir{f: newFile(fd, p), path: p, uid: d.uid, dev: st.Dev}, nil
}

// Size returns the size in bytes of the file system d is on (fstatfs of its descriptor).
func (d *Dir) Size() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(d.fd(), &st); err != nil {
		return 0, pathError("statfs", d.path, err)
	}
	return int64(st.Blocks) * st.Bsize, nil
}
