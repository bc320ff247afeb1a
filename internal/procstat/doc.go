// Package procstat parses /proc/<pid>/stat: the fields reaper needs to identify a process and tell
// whether it is dead. It imports nothing but package syscall and the standard library's packages
// without initialisation work of their own, so that the init of a PID namespace (internal/pidinit),
// which identifies each task it starts, can run before the program's other libraries initialise;
// internal/proc builds its view of processes on it.
//
// The package is Linux-only; elsewhere it is empty.
package procstat
