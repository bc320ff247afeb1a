package taskout

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cgreaper/reaper/internal/safefs"
)

// A store keeps the whole output of each task in a file of its own in its directory (in reaper, the
// session's, root's alone, which no task can write; see docs/security.md). A file is made on a task's
// first output, written through the descriptor it was made with, and read through descriptors opened
// for each read with safefs's checks.
//
// The files share one disk budget (Options.Budget; the state directory is usually a tmpfs). A write
// that would exceed it first removes the files of finished tasks, oldest first; when the files of
// running tasks fill it alone, the task whose write does not fit is cut: its file keeps its head, its
// most recent output (the tail, up to Options.Tail bytes) is kept in memory, and once its output ends
// the file gets a line that says how much was left out, then the tail, room made by removing finished
// files or the end of its own head. A failed write (a full disk) cuts the same way. Nothing of this
// fails a task: one whose file cannot be made keeps its head and tail in memory.

// DefaultBudget is the disk space a store's files may take by default.
const DefaultBudget = 64 << 20

// MaxTail is the most of a cut task's most recent output kept (in memory while the task writes, then
// in its file): at least what a result's tail shows at the largest max_output of characters most
// commands print.
const MaxTail = 1 << 20

// MaxFiles bounds the finished tasks' files a store keeps, whatever their size.
const MaxFiles = 256

// ErrRemoved is the cause of a failed read of a file that made room for newer output.
var ErrRemoved = errors.New("removed to stay within the session's output budget")

// Store is a directory of output files and the disk budget they share. Its methods are safe for
// concurrent use; its lock is a leaf (see the package's lock order).
type Store struct {
	// The fields up to mu are fixed at creation.
	dir      *safefs.Dir // nil keeps every output in memory
	budget   int64
	pool     *Pool // shared with other stores; nil: none
	tail     int   // the tail a cut output keeps
	log      *slog.Logger
	scanTime time.Duration
	scanWork int64
	stop     chan struct{} // closed by Close: line reads stop

	// mu guards the fields that follow, and every file's.
	mu     sync.Mutex
	closed bool    // Close was called: no file is made or opened from now on
	used   int64   // the bytes of every file that is not removed
	done   []*file // the files of outputs that ended, oldest first: what makes room
}

// file is one task's file.
type file struct {
	name string // in the store's directory
	path string // for results and listings

	// Guarded by Store.mu.
	size int64 // bytes counted against the budget
	gone bool  // removed to make room, or the store closed
}

// Options configure a Store. The zero Options keep every output in memory.
type Options struct {
	// Dir is where the outputs' files are made; nil keeps every output in memory.
	Dir *safefs.Dir
	// Budget is the disk space, in bytes, that the files take together; zero means DefaultBudget.
	Budget int64
	// Tail is how much of its most recent output a cut output keeps; zero means a quarter of
	// Budget, at most MaxTail.
	Tail int
	// Log gets what the store cannot do (remove a file, say); nil discards it.
	Log *slog.Logger
	// ScanTime bounds the time one line read (Grep, Tail) searches; zero means DefaultScanTime.
	ScanTime time.Duration
	// ScanWork bounds the work one line read does (see DefaultScanWork); zero means
	// DefaultScanWork.
	ScanWork int64
	// Pool, if set, is a budget the store shares with others (see Pool); nil means none.
	Pool *Pool
}

// NewStore returns a store of output files within o.Budget.
func NewStore(o Options) *Store {
	if o.Budget <= 0 {
		o.Budget = DefaultBudget
	}
	if o.Tail <= 0 {
		o.Tail = int(min(MaxTail, o.Budget/4))
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ScanTime <= 0 {
		o.ScanTime = DefaultScanTime
	}
	if o.ScanWork <= 0 {
		o.ScanWork = DefaultScanWork
	}
	return &Store{
		dir: o.Dir, budget: o.Budget, pool: o.Pool, tail: o.Tail, log: o.Log, scanTime: o.ScanTime, scanWork: o.ScanWork,
		stop: make(chan struct{}),
	}
}

// create makes the file name, open for reading and writing, mode 0600.
func (st *Store) create(name string) (*file, *os.File, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dir == nil {
		return nil, nil, errors.New("output is kept in memory only")
	}
	if st.closed {
		return nil, nil, fmt.Errorf("no output file is made: %w", ErrClosed)
	}
	f, err := st.dir.CreateFile(name, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return &file{name: name, path: st.dir.Join(name)}, f, nil
}

// grant lets f grow by up to n bytes, removing finished files to make room, and returns how many it
// may write: n, or what is left of the budget and of the pool's. pooled reports that the pool, not
// the store's own budget, stopped it short.
func (st *Store) grant(f *file, n int64) (k int64, pooled bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return 0, false // the files go with the directory
	}
	if over := st.used + n - st.budget; over > 0 {
		st.evictLocked(over)
	}
	k = max(min(n, st.budget-st.used), 0)
	if st.pool != nil && k > 0 {
		got := st.pool.take(k)
		if got < k {
			// The pool is spent, by this store or others: room from this store's own finished
			// files, which it gives back to the pool as they go.
			st.evictLocked(k - got)
			got += st.pool.take(k - got)
		}
		pooled = got < k
		k = got
	}
	st.used += k
	f.size += k
	return k, pooled
}

// refund gives back n bytes that f was granted and did not write, or let go of.
func (st *Store) refund(f *file, n int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.used -= n
	f.size -= n
	st.giveLocked(n)
}

// giveLocked gives n bytes back to the pool, unless the store closed (Close gave back all it held).
func (st *Store) giveLocked(n int64) {
	if st.pool != nil && !st.closed {
		st.pool.give(n)
	}
}

// finish records that f is written to its end: it may be removed to make room from now on.
func (st *Store) finish(f *file) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if f.gone {
		return
	}
	st.done = append(st.done, f)
	if len(st.done) > MaxFiles {
		st.removeLocked(st.done[0])
		st.done = st.done[1:]
	}
}

// evictLocked removes finished files, oldest first, until need bytes are free or none is left.
func (st *Store) evictLocked(need int64) {
	for need > 0 && len(st.done) > 0 {
		f := st.done[0]
		st.done = st.done[1:]
		need -= f.size
		st.removeLocked(f)
	}
}

func (st *Store) removeLocked(f *file) {
	if err := st.dir.Remove(f.name); err != nil {
		st.log.Warn("removing an output file to make room failed", "path", f.path, "error", err)
	}
	st.used -= f.size
	st.giveLocked(f.size)
	f.size, f.gone = 0, true
}

// open opens f for a read, unless it was removed or the store closed.
func (st *Store) open(f *file) (*os.File, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, fmt.Errorf("output file %s: %w", f.path, ErrClosed)
	}
	if f.gone {
		return nil, fmt.Errorf("output file %s: %w", f.path, ErrRemoved)
	}
	return st.dir.OpenFile(f.name, -1)
}

// isClosed reports whether the store closed.
func (st *Store) isClosed() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.closed
}

// isGone reports whether f was removed.
func (st *Store) isGone(f *file) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return f.gone
}

// Close stops the store making files and opening them for reads, and stops the line reads under way
// (with ErrClosed); its owner removes the directory, with the files. It does not wait for the reads:
// none holds a lock that a writer, an output's end or Close needs.
func (st *Store) Close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.closed {
		close(st.stop)
		if st.pool != nil {
			st.pool.give(st.used) // the owner removes the directory, with the files, next
		}
	}
	st.closed = true
	for _, f := range st.done {
		f.gone = true
	}
}
