// Package inspect is `reaper ps`'s look at the machine: every reaper instance, alive or dead, with
// its sessions, their tasks and their live processes, read from cgroupfs, /proc and the instances'
// state directories.
//
// It asks no instance anything and changes nothing, so it works while an instance is stopped or
// wedged. What it reads is data: the instances come from instance.Where.Look, checked as the sweep checks
// them, and a session's record is only shown, never acted on.
//
// The package holds no lock of its own.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package inspect
