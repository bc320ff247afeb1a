// Package reap waits for a process's children: one wait4 loop that hands each exit to whoever started
// that child and reaps every other one, and locked threads to fork from. Claim keeps a process to
// one owner of its child table (a guard waits for its one child, the server, through os.Process, and
// starts the loop only once that wait is over).
//
// Lock order. The package has one lock, Children.mu, held across each fork: callers may hold their
// own locks when they call Start (a Reaper holds its Session.mu), and the fork function Start runs
// must take none that is held while Start is called. The wait loop takes it alone.
//
// The package is Linux-only; elsewhere it is empty.
package reap
