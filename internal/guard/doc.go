// Package guard is the process between a client and reaper's server, and both sides of their link:
// the guard starts the server as its child, forwards signals to it, exits with its status and, when
// the server dies by any cause, kills whatever the server left (docs/signals.md tells the story).
//
// The guard (Run) is a child subreaper and the server's parent, with its own death as the server's
// parent-death signal (Signal): everything the server started comes to it when the server dies,
// whatever the server did to its cgroup, environment or parent chain. The server announces its
// instance's record on a pipe only the two of them hold, so no task can forge a message to the
// guard, and at a clean end says so (Clean); otherwise the guard kills what is in the announced
// slice and below itself and removes the slice and the state directory. The server's side (Link)
// reads the link from its environment, announces on it, and watches for the guard's death.
//
// The package holds no lock of its own beyond what os.Process holds for Run.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package guard
