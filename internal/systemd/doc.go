// Package systemd asks systemd's service manager, over D-Bus, for a delegated transient scope and
// has it move processes there: what `systemd-run --scope -p Delegate=yes` does, for a reaper whose
// own cgroup it cannot take over (a cgroup that also holds its client, or a login session's scope,
// which is root's).
//
// Root asks the system manager (its private socket, /run/systemd/private); anyone else asks their
// own user manager, on the user's bus at $XDG_RUNTIME_DIR/bus (where a user manager whose process
// sits in a session it does not own hands the move on to the system manager itself). The request
// (connecting, the call, the job it starts) is bounded by one deadline. A pid is a number of a PID
// namespace: the package asks only a manager that sees this process under the pid it gives, and
// refuses any other (a container with the host's /run mounted in).
//
// The package knows nothing of cgroupfs: it returns the scope's cgroup as systemd names it, and
// package cgroup takes it from there. It is a package of its own, not part of cgroup, because it
// speaks a protocol to a service, through github.com/coreos/go-systemd/v22/dbus and
// github.com/godbus/dbus/v5, which the packages that only read and write cgroupfs (and the guard, a
// sweep, `reaper ps`, which import cgroup) have no use for; only this package imports them.
//
// The package holds no lock of its own. The D-Bus library starts goroutines of its own for each
// connection (its reader, the dispatch of signals), which it gives no way to wait for: Start closes
// its connections before it returns, and those goroutines end once they see them closed, which may
// be some time after Start has returned. They hold nothing of a session's.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package systemd
