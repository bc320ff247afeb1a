// Package guard is the process between a client and reaper's server, and both sides of their link:
// the guard starts the server as its child, forwards signals to it, exits with its status and, when
// the server dies by any cause, kills whatever the server left.
//
// A user or an MCP client starts `reaper serve` or `reaper run`; that process is the guard (Run). It
// becomes a child subreaper and starts the server, the same program with the same command line, as
// its child with the guard's death as the server's parent-death signal (Signal). Because the guard is
// the server's parent and a subreaper, everything the server started comes to the guard when the
// server dies, whatever it did to its cgroup, its environment or its parent chain: an orderly exit,
// SIGKILL, an OOM kill, a crash. The server announces what its instance holds (its record: slice and
// state directory) on a pipe only the two of them have, so no task can forge a message to the guard,
// and at a clean end says so (Clean). A server that ended cleanly and left nothing to the guard is
// not cleaned up after; otherwise the guard kills what is in the announced slice and every process
// below itself, removes the slice and the state directory, and exits with the server's status.
//
// The server's side (Link) reads the link from its environment, announces on it, and watches for the
// guard's death: then it tears everything down at once. Killing both at the same moment (a node
// killing a whole group) leaves the clean-up to the next instance's sweep, or to `reaper sweep`.
//
// The guard holds no session, runs no command and speaks no protocol. The package holds no lock of
// its own beyond what os.Process holds for Run.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package guard
