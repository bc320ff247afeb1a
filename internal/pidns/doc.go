// Package pidns runs a session's processes in a PID namespace of their own, whose init is this
// program in another mode: when that init dies, by any cause, the kernel kills every process in the
// namespace, and no process can leave it. It holds both sides: the server's ([Start], [Init]) and the
// init's ([RunInit]), and the protocol between them, on a socket they share (see wire_linux.go).
//
// The init makes the mounts it inherited slaves of the host's, mounts a /proc of its namespace and
// what seals the session from the others (see mounts_linux.go), and says hello. Then it starts every
// process of the namespace when the server asks ([Init.Spawn]), with the descriptors and cgroup the
// request carries, answers with the task's pid, start time and pidfd, and reports each task's exit.
// It reaps the namespace's orphans, and exits when the socket reaches its end. The server never
// enters the namespace itself: a multithreaded process cannot enter a user namespace.
//
// An init costs its session about 1 MiB of private memory while the namespace lives (most of it the
// Go runtime's floor; an idle bash holds 265 KiB: BenchmarkBaseline in test/e2e), and about 3 ms of
// CPU to start; an idle one ends after Options.Idle. A C init held 7-20 KiB but could not start
// tasks where the namespace belongs to a user namespace, so it needed this one beside it: one init
// that starts every task on every architecture was kept (BENCHMARKS.md, "Reading").
//
// A task cannot end its namespace by signalling its init: the init handles every signal whose default
// would end it and does nothing with them, and the kernel drops a signal with the default action sent
// to a namespace's init from inside. The exceptions are signals 32 and 34, which Go's runtime leaves
// at their default action in a program without cgo: now and then (about one barrage of all 64
// signals in twenty) one is queued to a thread that blocks it for a moment and the init dies of it.
// A task that sends them may end its own session's namespace, no other; the server starts a new init
// for the next command.
//
// The init trusts nothing but the server: the socket is the only way to reach it, and no task inherits
// it. The server bounds what it reads from the init all the same (a root task may ptrace its init).
//
// Lock order. Init.mu guards the Init's state and Init.sendMu one request's messages on the socket;
// they are never held together, and neither is held while waiting for the init. The package takes no
// lock of its callers'. In the init, initProc.spawnMu (held while a request is handled, and while an
// exit is reported) comes before initProc.sendMu and before its reap.Children's lock.
//
// The package is Linux-only; elsewhere it is empty.
package pidns
