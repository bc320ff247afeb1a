// Package spare keeps descriptors in reserve for work that must not be refused one: a session's end.
//
// RLIMIT_NOFILE is the process's, and everything it does shares it: connections, tasks' pipes and
// pidfds, cgroup files, reads of /proc. Whoever can make the process hold descriptors (a client that
// opens connections, tasks that keep pipes) can leave none for a teardown, whose reads of cgroupfs
// and /proc, pidfds and waits each need one for a moment. A [Reserve] holds a few descriptors (each
// a /dev/null of its own, so that giving one up frees a slot of the process's table, EMFILE, and a
// file of the system's, ENFILE) and gives one up to an open that the limit refused, then runs that
// open again; closing what it made through the reserve takes the slot back.
//
// A freed slot is the lowest free one, and the next open of any thread gets it: between the close of
// a spare and the open it was given up for, another thread of the process may take it. The window is
// two system calls wide, the reserve's users take turns, and a spare lost so is opened again when a
// slot frees; what still fails is the caller's to retry until its deadline.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package spare
