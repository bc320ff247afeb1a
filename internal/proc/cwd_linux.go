package proc

import (
	"errors"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CwdRemoved reports whether process pid's working directory has been removed (its /proc/<pid>/cwd
// link reads "... (deleted)"), as a ready shell's may have been between commands. The link is read,
// never followed. It reports false where the link cannot be read (the process is gone, say), and
// true where it is too long to read whole (ENAMETOOLONG, or longer than the buffer): the ending that
// says so cannot be seen, and a caller that drops the process on true is on the safe side.
func CwdRemoved(pid int) bool {
	var buf [unix.PathMax + 16]byte
	n, err := unix.Readlink("/proc/"+strconv.Itoa(pid)+"/cwd", buf[:])
	if errors.Is(err, unix.ENAMETOOLONG) || err == nil && n == len(buf) {
		return true
	}
	if err != nil {
		return false
	}
	return strings.HasSuffix(string(buf[:n]), " (deleted)")
}
