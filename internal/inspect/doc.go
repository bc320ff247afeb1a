// Package inspect is `reaper ps`'s look at the machine: every reaper instance, alive or dead, with
// its sessions, their tasks and their live processes, read from cgroupfs, /proc and the instances'
// state directories. It asks no instance anything and changes nothing, so it works while an
// instance is stopped or wedged; what it reads is only shown, never acted on.
//
// The package holds no lock of its own.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package inspect
