// Package pidns runs a session's processes in a PID namespace of their own, whose init is this
// program in another mode: when that init dies, by any cause, the kernel kills every process in the
// namespace, and no process can leave it. It holds both sides: the server's ([Start], [Init]) and the
// init's ([RunInit]), and the protocol between them, on a socket they share.
//
// The server starts the init as this program again, with [InitArg] as its first argument (the
// program's main calls RunInit first thing when IsInit says so), in new PID and mount namespaces with
// SIGKILL as its parent-death signal, in a user namespace too where that is how the namespaces can
// be made, with its end of the socket as descriptor 3. The init makes the mounts it inherited slaves
// of the host's, mounts a /proc of its namespace so that ps, top and kill inside see the namespace's
// processes, and what seals the session from the others (a devpts instance of its own, whose root
// it hands the server in its hello; with Options.IPC an IPC namespace's message queues; with
// Options.PrivateTmp its own /tmp and /dev/shm: see mounts_linux.go), and says hello. Then it starts every process of the namespace when the server asks
// ([Init.Spawn]): the task's argv, environment, directory, process group and terminal flags,
// credentials, and every descriptor it gets (passed with SCM_RIGHTS, with the directory of the
// cgroup it is to be born in). It answers with the task's pid as the server sees it, its start time
// and a pidfd of it, and reports each task's exit. It reaps every process that ends up its child
// (the orphans of the namespace), silently, and exits when the socket reaches its end: the server is
// gone, or ended it (an idle one: see Options.Idle). One path on every architecture and in user
// namespaces alike: the server never enters the namespace itself (a multithreaded process cannot
// enter a user namespace, and the init is Go, built wherever reaper is).
//
// Why this init, and what it costs. A session with a namespace pays for its init while the namespace
// lives (an idle one's ends after Options.Idle), and reaper's own binary is not small: the init holds
// about 1.0 MiB of Private_Dirty (1028 KiB with one P, 1256 KiB with two; 1.3 MiB Pss among 20 live
// sessions, most of it the Go runtime's floor, about 570 KiB for a program that only sleeps), where
// an idle bash task of the same session holds 265 KiB and the server's share of a session about 230
// KiB (BenchmarkBaseline in test/e2e, 20 sessions, on the 2-core VM). It starts in 2.8-3.0 ms of CPU.
// A C init of a few kilobytes held 7-20 KiB and started in well under a millisecond, but it could not
// start tasks (the server forked them into the namespace from a thread that entered it, which a
// multithreaded process cannot do where the namespace belongs to a user namespace), so it needed the
// Go init beside it as a fallback, and a committed ELF per architecture. One init that starts every
// task everywhere costs about 1 MiB per live session and is the one kept (with huge pages off for it:
// see Start).
//
// A task cannot end its namespace by signalling its init: the init handles every signal whose default
// would end it and does nothing with them, and the kernel drops a signal with the default action sent
// to a namespace's init from inside. The exceptions are signals 32 and 34, which Go's runtime leaves
// at their default action in a program without cgo (glibc's SIGCANCEL and SIGRTMIN; 33 it handles):
// now and then (about one barrage of all 64 signals in twenty) one of these is queued instead and the
// init dies of it, most likely because the thread it was sent to blocked it at that moment, as the
// runtime's threads briefly do when it starts a thread. A task that sends them may end its own
// session's namespace, no other; the server starts a new init for the next command.
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
