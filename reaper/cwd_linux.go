package reaper

import (
	"os"

	"golang.org/x/sys/unix"
)

// cwdPipe makes a foreground command's working-directory pipe, non-blocking: the read end reaper's,
// the write end for the child, whose shell's EXIT trap writes the directory it leaves (shell.Script). Where the trap opens the write end again through
// /dev/fd (dash can name no descriptor above 9), the kernel checks that open against the pipe's
// owner: with Options.User the pipe is given to that user.
func (r *Reaper) cwdPipe() (rd, wr *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, nil, err
	}
	if u := r.opts.User; u != nil {
		if err := unix.Fchown(p[1], int(u.Uid), int(u.Gid)); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, nil, err
		}
	}
	return os.NewFile(uintptr(p[0]), "cwd"), os.NewFile(uintptr(p[1]), "cwd"), nil
}
