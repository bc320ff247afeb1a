// Package instance is what a reaper instance leaves on the machine, and how another process finds
// it: its name, its state directory and records, its sessions' records and markers.
//
// An instance is one Reaper, named "r<pid>-<start time>" after the process that runs it (Name): its
// slice below the cgroup root and its state directory ("reaper-<name>") carry that name, and every
// process of its sessions inherits a marker that starts with it (SessionMarker). In its state
// directory it keeps a Record of itself and, per session, a SessionRecord of its tasks. What another
// process finds there, in cgroupfs and in /proc is data, never authority: a name is parsed exactly,
// a record is read only as a bounded regular file of this user's and checked before it is used or
// shown (Look), and nothing is killed or removed that is not a dead instance's by its name, its place
// and its process's start time (see docs/security.md).
//
// The package holds no lock of its own.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package instance
