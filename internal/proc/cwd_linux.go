package proc

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CwdRemoved reports whether process pid's working directory has been removed (its /proc/<pid>/cwd
// link reads "... (deleted)"), as a ready shell's may have been between commands. The link is read,
// never followed. It reports false where the link cannot be read (the process is gone, say).
func CwdRemoved(pid int) bool {
	var buf [4096 + 16]byte
	n, err := unix.Readlink("/proc/"+strconv.Itoa(pid)+"/cwd", buf[:])
	if err != nil || n == len(buf) {
		return false
	}
	return strings.HasSuffix(string(buf[:n]), " (deleted)")
}
