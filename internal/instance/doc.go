// Package instance keeps what a reaper instance leaves on the machine, and finds another's: its state
// directory and records, its guard, the sweep after dead instances, and `reaper ps`'s inspection.
//
// An instance is one Reaper, named "r<pid>-<start time>" after the process that runs it (Name): its
// slice below the cgroup root and its state directory ("reaper-<name>") carry that name, and every
// process of its sessions inherits a marker that starts with it (SessionMarker). In its state
// directory it keeps a Record of itself and, per session, a SessionRecord of its tasks. What another
// process finds there, in cgroupfs and in /proc is data, never authority: a name is parsed exactly,
// a record is read only as a bounded regular file of this user's and checked before it is shown, and
// nothing is killed or removed that is not a dead instance's by its name, its place and its process's
// start time (see docs/security.md).
//
// Three programs read what an instance leaves, and none asks the instance anything: the guard
// (CleanUp), which cleans up after its server whatever way it died; Sweep, which every new Reaper and
// `reaper sweep` run after instances whose guard died too; and Inspect (`reaper ps`). Killing goes
// through internal/kill, like every other kill of the program.
//
// The package is internal, not a part of package reaper's API and not a package of its own at the
// top: the Reaper (which writes the records and sweeps when it starts) and cmd/reaper (which runs the
// guard, `reaper sweep` and `reaper ps`) both import it from above, and no program outside this module
// has a use for it. Package reaper names the two types its own API shows (Instance, SweepReport).
//
// The package holds no lock of its own.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package instance
