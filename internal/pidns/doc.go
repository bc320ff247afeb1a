// Package pidns runs a session's processes in a PID namespace of their own, whose init is a small
// process of ours: when that init dies, by any cause, the kernel kills every process in the
// namespace, and no process can leave it. This package is the server's side ([Start], [Init]); the
// init is internal/pidinit, and the protocol between them internal/pidwire.
//
// The init is this program run again with [InitArg] as its first argument, in new PID and mount
// namespaces (and a user namespace where that is how they can be made), with SIGKILL as its
// parent-death signal. It makes the mounts it inherited slaves of the host's, mounts a /proc of its
// namespace so that ps, top and kill inside see the namespace's processes, and then starts processes
// when the server asks, over the socket it inherits as descriptor 3: the task's argv, environment,
// directory, process group and terminal flags, credentials, and every descriptor it gets (passed with
// SCM_RIGHTS, with the directory of the cgroup it is to be born in). It answers with the task's pid
// as the server sees it, its start time and a pidfd of it, reports each task's exit, and reaps every
// other process that ends up its child (the orphans of the namespace), silently. It exits when the
// socket reaches its end: the server is gone.
//
// A task cannot end its namespace by signalling its init, with one exception: signals 32 and 34,
// which Go's runtime leaves at their default action in a program without cgo (glibc's SIGCANCEL and
// SIGRTMIN; 33 it handles). The kernel drops a signal with the default action that is sent to a
// namespace's init from inside, but now and then (about one barrage of all 64 signals in twenty) one
// of these is queued instead and the init dies of it: most likely the thread it was sent to blocked
// it at that moment, as the runtime's threads briefly do when it starts a thread, and a blocked
// signal is never dropped. A task that sends them may end its own session's namespace, no other;
// the server starts a new init for the next command.
//
// The init trusts nothing but the server: the socket is the only way to reach it, and no task inherits
// it. The server bounds what it reads from the init all the same (a root task may ptrace its init).
//
// Lock order. Init.mu guards the Init's state and Init.sendMu one request's messages on the socket;
// they are never held together, and neither is held while waiting for the init. The package takes no
// lock of its callers'; a Reaper calls Init's methods with its Session.mu held.
//
// The package is Linux-only; elsewhere it is empty.
package pidns
