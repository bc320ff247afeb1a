// Package smallinit is the init of a session's PID namespace where reaper's server forks every
// process of the session itself: a static program of a few kilobytes (c/init.c, in C without a C
// library), run in place of this Go program (internal/pidinit), whose start, idle life and end cost a
// small part of what a Go runtime's do.
//
// It does what the namespace needs of an init and nothing else: it checks that it is pid 1 with the
// server's socket as descriptor 3, makes itself not dumpable, ignores every signal (SIGCHLD included,
// so the kernel reaps the orphans it adopts), makes its mounts slaves of the host's and mounts the
// namespace's /proc, says hello, sends signals to every other process of its namespace when the
// server asks (pidwire.MsgSignal), and exits at the end of its socket. It never starts a process:
// where the server cannot enter the namespaces (internal/pidns.Init.Fork), the Go init serves.
//
// The program is built for amd64 only; elsewhere Load fails with ErrUnsupported, and reaper runs its
// own program as the init. The built file is committed beside its source (init_linux_amd64.elf), so
// that building reaper needs no C compiler; TestBuild checks that the source builds it, and
// `go test ./internal/smallinit -run TestBuild -update` builds it again after a change.
//
// The package is Linux-only; elsewhere it is empty.
package smallinit
