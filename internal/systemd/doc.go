// Package systemd asks systemd's service manager, over D-Bus, for a delegated transient scope and
// has it move processes there (what `systemd-run --scope -p Delegate=yes` does), for a reaper whose
// own cgroup it cannot take over (one that also holds its client, or a login session's scope).
//
// Root asks the system manager (its private socket, /run/systemd/private); anyone else their own
// user manager, on $XDG_RUNTIME_DIR/bus. One deadline bounds the request (connecting, the call, the
// job it starts). A pid is a number of a PID namespace: the package asks only a manager that sees
// this process under the pid it gives (not a container's host manager through a mounted /run).
//
// The package returns the scope's cgroup as systemd names it; package cgroup takes it from there. It
// is apart from cgroup so that only it imports the D-Bus libraries.
//
// The package holds no lock of its own. The D-Bus library starts goroutines for each connection,
// which it gives no way to wait for: Start closes its connections before it returns, and they end
// once they see them closed. They hold nothing of a session's.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package systemd
