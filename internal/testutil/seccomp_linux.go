package testutil

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Namespace flags for DenyNamespaces.
const (
	AllNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWCGROUP |
		unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWNET
	UserNamespace = unix.CLONE_NEWUSER
)

// DenyClone3 installs a seccomp filter, on every thread of this process and inherited by whatever it
// executes, that answers clone3 with errno: ENOSYS as Docker's and containerd's default profiles do,
// EPERM as some stricter ones do. It sets no_new_privs, which the filter needs without
// CAP_SYS_ADMIN. Nothing undoes it: run it in a helper process (see Helper).
func DenyClone3(errno unix.Errno) error {
	return DenySyscall(nrClone3, errno)
}

// DenySyscall is DenyClone3 for the system call numbered nr (unix.SYS_OPENAT2, say: a kernel before
// 5.6, or a seccomp profile that does not know it).
func DenySyscall(nr uint32, errno unix.Errno) error {
	return install([]unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: nr, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrno | uint32(errno)},
		{Code: unix.BPF_RET | unix.BPF_K, K: retAllow},
	})
}

// DenyNamespaces installs a filter (as DenyClone3 does) that answers clone, clone3 and unshare with
// errno when they would make any of the namespaces in flags, as container runtimes' default profiles
// do for a container without CAP_SYS_ADMIN (EPERM for every namespace), or as a host does where user
// namespaces are disabled (ENOSPC for CLONE_NEWUSER, what user.max_user_namespaces=0 gives, without
// changing that machine-wide setting). clone3 passes its flags in memory, where a filter cannot see
// them: it is answered with ENOSYS, as those profiles do, so that callers fall back to clone.
func DenyNamespaces(flags uint32, errno unix.Errno) error {
	const argLow = 16 // seccomp_data.args[0], its low 32 bits (little-endian), which hold every CLONE_NEW*
	return install([]unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: nrClone3, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrno | uint32(unix.ENOSYS)},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_CLONE, Jt: 1, Jf: 0},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_UNSHARE, Jt: 0, Jf: 3},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: argLow},
		{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: flags, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrno | uint32(errno)},
		{Code: unix.BPF_RET | unix.BPF_K, K: retAllow},
	})
}

const (
	nrClone3 = 435 // the same on every architecture that has clone3
	retAllow = 0x7fff0000
	retErrno = 0x00050000
)

func install(filter []unix.SockFilter) error {
	const (
		setModeFilt = 1 // SECCOMP_SET_MODE_FILTER
		flagTsync   = 1 // SECCOMP_FILTER_FLAG_TSYNC
	)
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, setModeFilt, flagTsync, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}
