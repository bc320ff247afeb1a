package spare

import (
	"errors"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Reserve holds descriptors for work that the descriptor limit must not refuse (see the package
// documentation). A nil *Reserve holds none: its Open only opens, its Close only closes. Its methods
// are safe for concurrent use.
type Reserve struct {
	size int // fixed at creation

	short atomic.Int32 // how many spares are missing: lent, lost to another thread, or never opened

	// mu guards the field that follows. It is held across the opens that spares are given up for,
	// so that the reserve's users take turns.
	mu     sync.Mutex
	spares []int
}

// New returns a reserve of n descriptors, opened now; those that cannot be opened now are opened as
// slots free (see Close).
func New(n int) *Reserve {
	r := &Reserve{size: n}
	r.mu.Lock()
	defer r.mu.Unlock()
	for range n {
		fd, err := openSpare()
		if err != nil {
			break
		}
		r.spares = append(r.spares, fd)
	}
	r.short.Store(int32(n - len(r.spares)))
	return r
}

// openSpare opens a spare: a /dev/null of its own, closed on exec.
func openSpare() (int, error) {
	return unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

// Limited reports whether err is a refusal by the descriptor limits: the process's (EMFILE) or the
// system's (ENFILE).
func Limited(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}

// Open runs open, a system call that makes one descriptor (open, openat, pidfd_open, eventfd). Where
// the descriptor limit refuses it, a spare is given up and open runs again, as long as spares are
// left and the limit is what refuses it. What Open returns is closed with Close.
func (r *Reserve) Open(open func() (int, error)) (int, error) {
	fd, err := open()
	if r == nil || !Limited(err) {
		return fd, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for Limited(err) && len(r.spares) > 0 {
		n := len(r.spares) - 1
		unix.Close(r.spares[n])
		r.spares = r.spares[:n]
		r.short.Add(1)
		fd, err = open()
	}
	return fd, err
}

// Close closes fd, which Open made or not, and then refills the reserve where it is short (Refill).
func (r *Reserve) Close(fd int) {
	unix.Close(fd)
	r.Refill()
}

// Refill opens spares where the reserve is short, while slots are free: after a descriptor was closed,
// the slot it freed is the first taken.
func (r *Reserve) Refill() {
	if r == nil || r.short.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.spares) < r.size {
		fd, err := openSpare()
		if err != nil {
			break
		}
		r.spares = append(r.spares, fd)
		r.short.Add(-1)
	}
}

// Spares returns how many spares the reserve holds now.
func (r *Reserve) Spares() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spares)
}

// Release closes every spare; the reserve holds none from then on, and opens none.
func (r *Reserve) Release() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, fd := range r.spares {
		unix.Close(fd)
	}
	r.spares, r.size = nil, 0
	r.short.Store(0)
}
