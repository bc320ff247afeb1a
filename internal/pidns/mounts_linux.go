package pidns

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The init's mounts. The init's mount namespace is the session's: every task it starts lives there.
// Besides its /proc, the init gives it what seals the session from the others, and what dies with it:
//
//   - A devpts instance of its own on /dev/pts (newinstance; since Linux 4.7 every devpts mount is
//     one), so that a task's terminal, which the server allocates there (Init.Devpts), is no file any
//     other session can name: another session's /dev/pts is another instance. Its ptmx node is open
//     to all (ptmxmode 0666), as the host's /dev/ptmx is, for the terminals the tasks open
//     themselves (script, tmux, ssh). Opening /dev/ptmx allocates in the instance mounted at the pts
//     directory beside it; where /dev/ptmx turns out to allocate elsewhere all the same, the
//     instance's own ptmx is bound over it.
//   - With an IPC namespace (Options.IPC), a POSIX message queue file system of that namespace on
//     /dev/mqueue, where one is mounted on the host: there the tasks see their own queues.
//   - With Options.PrivateTmp, a tmpfs on /tmp and on /dev/shm: the session's files there, and its
//     POSIX shared memory, are no other session's to read, and die with the namespace.
//
// Each mount is made only where its directory exists; what fails is reported in the hello, which
// the server reads as what the session got.

// Options of the init, after its mode in its arguments.
const (
	argIPC        = "ipc"         // it was made with an IPC namespace of its own
	argPrivateTmp = "private-tmp" // it mounts a tmpfs on /tmp and /dev/shm
)

// mqueueMagic is MQUEUE_MAGIC, the f_type of a POSIX message queue file system.
const mqueueMagic = 0x19800202

// mountDevpts mounts a devpts instance of the init's own on /dev/pts, makes /dev/ptmx allocate there,
// and returns an O_PATH descriptor of the instance's root for the server.
func (in *initProc) mountDevpts() (int, error) {
	if !isDir("/dev/pts") {
		return -1, errors.New("/dev/pts is not a directory")
	}
	opts := "newinstance,ptmxmode=0666,mode=0620"
	if !in.userNS {
		opts += ",gid=5" // the tty group, as the host's mount has it (not mapped in a user namespace)
	}
	err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, opts)
	if errors.Is(err, unix.EINVAL) && !in.userNS {
		err = unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	}
	if err != nil {
		return -1, fmt.Errorf("mounting a devpts instance on /dev/pts: %w", err)
	}
	root, err := unix.Open("/dev/pts", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: "/dev/pts", Err: err}
	}
	if !ptmxAllocatesIn(root) && isCharDev("/dev/ptmx") {
		if err := unix.Mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, ""); err != nil {
			unix.Close(root)
			return -1, fmt.Errorf("binding /dev/pts/ptmx over /dev/ptmx: %w", err)
		}
	}
	return root, nil
}

// ptmxAllocatesIn reports whether opening /dev/ptmx makes a terminal in the devpts instance whose
// root is dir: the other side of the terminal it makes is on that file system.
func ptmxAllocatesIn(dir int) bool {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(m)
	if unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0) != nil { // a locked terminal's other side does not open
		return false
	}
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return false
	}
	defer unix.Close(int(s))
	var peer, root unix.Stat_t
	return unix.Fstat(int(s), &peer) == nil && unix.Fstat(dir, &root) == nil && peer.Dev == root.Dev
}

// mountMqueue mounts the IPC namespace's message queue file system on /dev/mqueue, where the host
// has one mounted there.
func mountMqueue() error {
	var fs unix.Statfs_t
	if unix.Statfs("/dev/mqueue", &fs) != nil || fs.Type != mqueueMagic {
		return nil
	}
	if err := unix.Mount("mqueue", "/dev/mqueue", "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting the IPC namespace's mqueue on /dev/mqueue: %w", err)
	}
	return nil
}

// mountTmp mounts a tmpfs of the namespace's own on /tmp and /dev/shm (where it is a directory).
func mountTmp() error {
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		if !isDir(dir) {
			if dir == "/tmp" {
				return errors.New("/tmp is not a directory")
			}
			continue
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("mounting a private tmpfs on %s: %w", dir, err)
		}
	}
	return nil
}

// isDir reports whether path is a directory, not through a link at its last component.
func isDir(path string) bool {
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// isCharDev reports whether path is a character device, not through a link at its last component.
func isCharDev(path string) bool {
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR
}
