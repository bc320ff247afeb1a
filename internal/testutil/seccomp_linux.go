package testutil

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DenyClone3 installs a seccomp filter, on every thread of this process and inherited by whatever it
// executes, that answers clone3 with errno: ENOSYS as Docker's and containerd's default profiles do,
// EPERM as some stricter ones do. It sets no_new_privs, which the filter needs without
// CAP_SYS_ADMIN. Nothing undoes it: run it in a helper process (see Helper).
func DenyClone3(errno unix.Errno) error {
	const nrClone3 = 435 // the same on every architecture that has clone3
	return DenySyscall(nrClone3, errno)
}

// DenySyscall is DenyClone3 for the system call numbered nr (unix.SYS_OPENAT2, say: a kernel before
// 5.6, or a seccomp profile that does not know it).
func DenySyscall(nr uint32, errno unix.Errno) error {
	const (
		retAllow    = 0x7fff0000
		retErrno    = 0x00050000
		setModeFilt = 1 // SECCOMP_SET_MODE_FILTER
		flagTsync   = 1 // SECCOMP_FILTER_FLAG_TSYNC
	)
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: nr, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrno | uint32(errno)},
		{Code: unix.BPF_RET | unix.BPF_K, K: retAllow},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, setModeFilt, flagTsync, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}
