// Package sweep kills and removes what dead reaper instances left on the machine: their slices, the
// processes that carry their marker anywhere, and their state directories.
//
// Every new Reaper runs it in the background, and `reaper sweep` on demand. It asks no instance
// anything: it finds them with instance.Where.Look, tells the dead from the live by their process's
// pid and start time (instance.Alive), and never touches a live one or anything that is not a dead
// instance's by its name, its place and its record (see docs/security.md).
//
// The package holds no lock of its own.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package sweep
