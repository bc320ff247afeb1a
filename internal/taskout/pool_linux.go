package taskout

import "sync/atomic"

// A Pool is a disk budget that several stores share, beside each one's own (in reaper, every
// session's output files together). A store takes from its pool what it writes and gives it back
// when a file is removed or the store closes; where the pool is spent, the store makes room as at its
// own budget, and its cuts say which budget made them.
type Pool struct {
	budget int64 // fixed at creation
	used   atomic.Int64
}

// NewPool returns a pool of budget bytes.
func NewPool(budget int64) *Pool { return &Pool{budget: budget} }

// Budget returns the pool's budget in bytes.
func (p *Pool) Budget() int64 { return p.budget }

// Used returns the bytes the pool's stores hold now.
func (p *Pool) Used() int64 { return p.used.Load() }

// take grants up to n bytes and returns how many.
func (p *Pool) take(n int64) int64 {
	for {
		used := p.used.Load()
		k := max(min(n, p.budget-used), 0)
		if p.used.CompareAndSwap(used, used+k) {
			return k
		}
	}
}

// give returns n bytes.
func (p *Pool) give(n int64) { p.used.Add(-n) }
