// Package kill is the program's one kill policy: how a session's or a task's processes, a dead
// instance's slice, a subreaper's leftovers or the escapees of sessions are ended, and how long
// anything waits for them.
//
// [Policy.Terminate] ends a scope in phases (see there); what the caller knows comes in as data
// ([Scope]), and the package calls nothing back. [Policy.Escapees] is the check for escapees on its
// own, [Policy.Slice] the hard kill of a slice alone, [Policy.Everything] the kill of an instance's
// slice and of whatever is left below a subreaper, and [Policy.Processes] of processes a walk found.
// Nothing else in the program walks, signals and waits to decide how a process dies.
//
// Every call has one clock (see clock): one deadline for every wait, and one hurry signal, the
// caller's context. A teardown cannot be starved of descriptors: what the limit refuses it takes from
// the policy's reserve (internal/spare), what fails even so is tried again until the deadline, and
// what it reports as remaining is what a last look found alive, with Report.Unaccounted where it
// could not look.
//
// The package starts no goroutine that outlives a call; it holds no lock but, during the check for
// escapees, the one its caller hands it (Escapees.Turns).
//
// The package is Linux-only; elsewhere it holds only this documentation.
package kill
