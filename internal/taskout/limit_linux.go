package taskout

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Bounds of one line read (Grep, Tail) by default; Options may set others.
const (
	// DefaultScanWork is the work one read may do, in bytes searched times the pattern's cost (see
	// Compile; 1 a byte without a pattern): 64 MiB with a pattern of cost 32. It decides how far a
	// read reaches, the same on a loaded machine as on a quiet one, and bounds its CPU (about 12 s
	// with the costliest patterns, BenchmarkPatternCost).
	DefaultScanWork = 1 << 31
	// DefaultScanTime is how long one read may search: the backstop where the machine is so loaded
	// that the work takes longer.
	DefaultScanTime = 30 * time.Second
)

// lookEvery is how much work a search does between looks at the clock, the call's context and the
// store (and before a line that alone does more): a couple of milliseconds of the costliest patterns'
// work at most, microseconds of most.
const lookEvery = 1 << 16

// ErrClosed is the cause of a read stopped, or refused, because its store closed (its session is
// ending).
var ErrClosed = errors.New("the output's store is closed: its session is ending")

// A limiter stops a search: between lines, at its time or work limit (a stop: what was searched is
// returned, with where to continue), and when the call's context is done or the store closes (an
// error). A search always gets past its first line, so that a read repeated from where the last
// stopped goes forward.
type limiter struct {
	ctx      context.Context
	closed   <-chan struct{}
	limit    time.Duration
	deadline time.Time
	work     int64 // the limit of work
	left     int64 // what is left of it
	since    int64 // work done since the last look
	stopped  string
	err      error
}

func (st *Store) limiter(ctx context.Context) *limiter {
	return &limiter{
		ctx: ctx, closed: st.stop, limit: st.scanTime, deadline: time.Now().Add(st.scanTime),
		work: st.scanWork, left: st.scanWork,
	}
}

// allow reports whether the search may go on with work units more, and counts them; false once it
// stops (see stopped and err).
func (l *limiter) allow(units int64) bool {
	if l.stopped != "" || l.err != nil {
		return false
	}
	if l.since+units >= lookEvery && !l.look() {
		return false
	}
	if units > l.left && l.left < l.work {
		l.stopped = fmt.Sprintf("its work limit (%d: bytes searched times the pattern's cost)", l.work)
		return false
	}
	l.left -= units
	l.since += units
	return true
}

// look stops the search where the call or the store is done, or the time is up.
func (l *limiter) look() bool {
	l.since = 0
	select {
	case <-l.ctx.Done():
		l.err = fmt.Errorf("search stopped: %w", context.Cause(l.ctx))
		return false
	case <-l.closed:
		l.err = ErrClosed
		return false
	default:
	}
	if l.left < l.work && time.Now().After(l.deadline) {
		l.stopped = fmt.Sprintf("its time limit (%v)", l.limit)
		return false
	}
	return true
}
