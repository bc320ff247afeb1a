// Package pidinit is the init of a session's PID namespace that starts the session's processes: this
// program started again by internal/pidns with pidwire.InitArg, as pid 1 of new PID and mount
// namespaces, where the server cannot fork into them itself or the small init (internal/smallinit)
// cannot run (see internal/pidns for what it does and why). [Main] runs from cmd/reaper/internal/nsinit's package initialisation and
// never returns to it.
//
// Like internal/pidwire it imports only what Go's initialisation order reaches early (no fmt, no
// strings, no x/sys/unix): the init then runs after some twenty packages have initialised rather than
// sixty, which a session's first command waits for.
//
// Lock order. spawnMu (held while a request is handled, and while an exit is reported) comes before
// sendMu (one message at a time) and before its reap.Children's lock (held across each fork).
//
// The package is Linux-only; elsewhere it is empty.
package pidinit
