package reap

import (
	"errors"
	"sync/atomic"
)

// claimed is set while something owns this process's child table: a process has one, and only one
// wait4(-1) loop can run over it, so only one Reaper or guard may exist at a time. It is the
// package's only global state, and it mirrors the kernel's.
var claimed atomic.Bool

// Claim runs start as this process's one owner of its child table, and gives the table back if start
// fails. The owner, which starts a Children loop, calls Release once that loop has ended.
func Claim[T any](start func() (T, error)) (T, error) {
	if !claimed.CompareAndSwap(false, true) {
		var zero T
		return zero, errors.New("a Reaper or Guard is active in this process (there is one child table)")
	}
	v, err := start()
	if err != nil {
		claimed.Store(false)
	}
	return v, err
}

// Release gives the child table back (see Claim).
func Release() { claimed.Store(false) }
