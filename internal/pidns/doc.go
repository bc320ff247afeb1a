// Package pidns runs a session's processes in a PID namespace of their own, whose init is a small
// process of ours: when that init dies, by any cause, the kernel kills every process in the
// namespace, and no process can leave it. This package is the server's side ([Start], [Init]); the
// init is internal/smallinit or internal/pidinit, and the protocol between them internal/pidwire.
//
// The init is one of two programs, each started in new PID and mount namespaces with SIGKILL as its
// parent-death signal, with its end of the socket as descriptor 3. Where the server forks every
// process of the namespace itself (see below), it is the small init (internal/smallinit,
// Options.Small): a static program of a few kilobytes that mounts the namespace's /proc, ignores
// every signal, lets the kernel reap its orphans and signals the namespace's processes when asked.
// Otherwise, and where the small init cannot run, it is this program run again with [InitArg] as its
// first argument (internal/pidinit), in a user namespace too where that is how the namespaces can be
// made: it does the same, and starts the tasks. Either makes the mounts it inherited slaves of the
// host's, mounts a /proc of its namespace so that ps, top and kill inside see the namespace's
// processes, reaps (or has the kernel reap) every process that ends up its child (the orphans of the
// namespace), silently, and exits when the socket reaches its end: the server is gone, or ended it
// (an idle one: see Options.Idle).
//
// Processes get into the namespace one of two ways. Where the server can enter the namespaces (they
// were made without a user namespace), a thread of its own does, and forks them there ([Init.Fork],
// see entry_linux.go): they are the server's children. Otherwise the Go init starts them when the
// server asks ([Init.Spawn]), over the socket: the task's argv, environment, directory, process group and
// terminal flags, credentials, and every descriptor it gets (passed with SCM_RIGHTS, with the
// directory of the cgroup it is to be born in). It answers with the task's pid as the server sees it,
// its start time and a pidfd of it, and reports each task's exit.
//
// A task cannot end its namespace by signalling its init: the small init ignores every signal. The
// Go init has one exception: signals 32 and 34, which Go's runtime leaves at their default action in
// a program without cgo (glibc's SIGCANCEL and SIGRTMIN; 33 it handles). The kernel drops a signal
// with the default action that is sent to a namespace's init from inside, but now and then (about one
// barrage of all 64 signals in twenty) one of these is queued instead and the init dies of it: most
// likely the thread it was sent to blocked it at that moment, as the runtime's threads briefly do
// when it starts a thread, and a blocked signal is never dropped. A task that sends them may end its
// own session's namespace, no other; the server starts a new init for the next command.
//
// The init trusts nothing but the server: the socket is the only way to reach it, and no task inherits
// it. The server bounds what it reads from the init all the same (a root task may ptrace its init).
//
// Lock order. Init.mu guards the Init's state and Init.sendMu one request's messages on the socket;
// they are never held together, and neither is held while waiting for the init. Fork holds neither
// while it forks (the child reaper's lock is held then), and the child reaper reports an exit to the
// Init (taking Init.mu) with its own lock released. The package takes no lock of its callers'; a
// Reaper calls Init's methods with its Session.mu held.
//
// The package is Linux-only; elsewhere it is empty.
package pidns
