// Package shell writes the scripts commands run in, and reads back what they record: which shell runs
// them, the EXIT trap through which a foreground command hands back the working directory it leaves,
// and the loader of a shell started ahead of its command (a ready shell) that waits for it.
//
// The working directory of a session persists across its foreground commands: each command's shell
// writes its final directory, as it exits, to a pipe that reaper reads once the shell has exited. A
// pipe, not a file: a file would have to live where the task may write (its user's), and whatever
// reaper read or wrote there as root the task could replace with a link, a FIFO or a device. The pipe
// is the child's descriptor CwdFD. Nothing waits on it: a process the command left behind may hold
// the write end for good (see ReadCwd). A record ends with a NUL, which no path holds (a newline may
// be part of a directory's name).
package shell
