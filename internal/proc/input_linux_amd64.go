package proc

import "golang.org/x/sys/unix"

// archInputCall adds the calls that only some architectures have: select(2) and poll(2).
func archInputCall(nr int64) int {
	switch nr {
	case unix.SYS_SELECT:
		return waitSelect
	case unix.SYS_POLL:
		return waitPoll
	}
	return 0
}
