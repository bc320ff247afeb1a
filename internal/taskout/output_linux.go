package taskout

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cgreaper/reaper/internal/textfit"
)

// Output is a task's combined stdout and stderr: the whole stream in the task's file (see Store), up
// to the store's disk budget; past that, its most recent bytes in memory, which go into the file once
// the output ends. Offsets are positions in the whole stream, so a reader that falls behind learns
// exactly how much it missed. Nothing here splits on lines.
//
// The kept parts are the head, [0, head), in the file (or in memory where there is none), and, once
// cut, the tail, in a ring or, once the output ended, in the file after a line for the gap.
type Output struct {
	// The fields up to epoch are fixed at creation.
	store *Store
	name  string // the file's name

	// epoch counts the changes of what the file holds before the head's end: the output's end
	// shortening the head, at most once. It changes before the file does, so that a read that saw
	// the old value after reading read what it meant to (see view).
	epoch atomic.Uint64

	// mu guards the fields that follow, and every write of the file (reads go through views).
	mu      sync.Mutex
	file    *file        // set once the file is made
	fd      *os.File     // the file, open for writing until the output ends
	mem     []byte       // the head, where there is no file
	memCap  int          // how much of the head mem keeps
	noFile  string       // why there is no file ("" where there is one, or none was needed yet)
	head    int64        // the head's length
	cut     string       // why the head stopped growing ("" while it grows)
	tail    textfit.Ring // the tail, from the cut until it goes to the file
	tailAt  int64        // where the tail starts in the file, once it is there; -1 before
	tailLen int64        // the tail's length once it is in the file
	total   int64        // bytes written to the stream so far
	lines   int64        // newlines written so far
	chars   int64        // characters written so far (see textfit.CountChars)
	last    [3]byte      // the stream's last bytes, for a character still being written
	lastN   int
	next    int64 // the cursor of incremental reads: where the previous read ended
	ended   bool  // the output ended: the file is complete and closed, the tail in it
	gone    bool  // a finished foreground command's output was returned: later writes are not kept
	after   int64 // bytes written once gone: counted, not kept (the stream read ends at total)
}

// New returns an empty stream kept in the store's file name (in memory only where the store has no
// directory: at most half the store's tail of head, and as much of tail).
func (st *Store) New(name string) *Output {
	o := &Output{store: st, name: name, tailAt: -1, memCap: st.tail / 2}
	if st.dir == nil {
		o.noFile = "output kept in memory only"
	}
	return o
}

// Write appends p to the stream; it never fails and never blocks on a reader.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	if o.gone || o.ended {
		o.after += int64(n)
		return n, nil
	}
	o.total += int64(n)
	o.lines += int64(bytes.Count(p, []byte{'\n'}))
	o.chars += textfit.CountChars(p)
	o.keepLast(p)
	if o.cut == "" {
		p = o.writeHeadLocked(p)
	}
	o.tail.Write(p)
	return n, nil
}

// keepLast keeps the stream's last three bytes.
func (o *Output) keepLast(p []byte) {
	if len(p) >= 3 {
		o.lastN = copy(o.last[:], p[len(p)-3:])
		return
	}
	b := append(o.last[:o.lastN:o.lastN], p...)
	o.lastN = copy(o.last[:], b[max(0, len(b)-3):])
}

// writeHeadLocked adds what of p fits to the head and returns the rest, cutting the head where it
// does not all fit.
func (o *Output) writeHeadLocked(p []byte) []byte {
	if o.file == nil && o.noFile == "" {
		file, fd, err := o.store.create(o.name)
		if err != nil {
			o.noFile = "its output file could not be made: " + err.Error()
		} else {
			o.file, o.fd = file, fd
		}
	}
	if o.file == nil {
		k := min(len(p), o.memCap-len(o.mem))
		o.mem = append(o.mem, p[:k]...)
		o.head += int64(k)
		if k < len(p) {
			o.cutLocked(o.noFile, o.memCap)
		}
		return p[k:]
	}
	k, pooled := o.store.grant(o.file, int64(len(p)))
	if k > 0 {
		w, err := o.fd.WriteAt(p[:k], o.head)
		o.head += int64(w)
		if int64(w) < k {
			o.store.refund(o.file, k-int64(w))
			o.cutLocked(fmt.Sprintf("writing its output file failed: %v", err), o.store.tail)
			return p[w:]
		}
	}
	switch {
	case k < int64(len(p)) && pooled:
		o.cutLocked(fmt.Sprintf("the output files of all sessions together reached their budget of %s (--output-budget-total)", textfit.ByteSize(o.store.pool.Budget())), o.store.tail)
	case k < int64(len(p)):
		o.cutLocked(fmt.Sprintf("the session's output files reached their budget of %s", textfit.ByteSize(o.store.budget)), o.store.tail)
	}
	return p[k:]
}

// cutLocked stops the head from growing: the tail keeps the last size bytes from now on.
func (o *Output) cutLocked(why string, size int) {
	o.cut = why
	o.tail = textfit.NewRing(size)
}

// Discard ends a finished foreground command's output: its result has been returned, and what its
// leftover processes write later is not kept, only counted. A read of its file starts at its
// beginning: the result held only its head and tail.
func (o *Output) Discard() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gone = true
	o.endLocked()
	o.next = 0
}

// End ends the output: every writer is gone.
func (o *Output) End() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.endLocked()
}

// endLocked writes the tail into the file after a line for what was left out, and closes the file.
// Room is made within the budget by removing finished files, else by shortening the head. Where the
// file cannot take the tail, the tail stays in memory.
func (o *Output) endLocked() {
	if o.ended {
		return
	}
	o.ended = true
	if o.file == nil {
		return
	}
	defer func() {
		o.fd.Close()
		o.fd = nil
		o.store.finish(o.file)
	}()
	if o.cut == "" || o.tail.Len() == 0 || o.store.isClosed() {
		return
	}
	tail := o.tail.View()
	need := int64(len(fileNotice(1<<62, o.cut)) + len(tail)) // room for the notice at its longest
	got, _ := o.store.grant(o.file, need)
	if got+o.head < need-int64(len(tail))+1 {
		// Not even the notice and a byte of tail fit, with the whole head given up (a budget far
		// below the smallest the flags allow): the tail stays in memory.
		o.store.refund(o.file, got)
		return
	}
	if short := need - got; short > 0 {
		// The head gives up its end to the tail.
		shrink := min(short, o.head)
		o.epoch.Add(1)
		if o.fd.Truncate(o.head-shrink) != nil {
			o.store.refund(o.file, got)
			return
		}
		o.head -= shrink
		got += shrink
		if short -= shrink; short > 0 {
			tail = tail[short:] // only a budget near the notice's length gets here
		}
	}
	buf := append([]byte(fileNotice(o.total-int64(len(tail))-o.head, o.cut)), tail...)
	if _, err := o.fd.WriteAt(buf, o.head); err != nil {
		o.store.refund(o.file, got)
		return
	}
	o.store.refund(o.file, got-int64(len(buf)))
	o.tailAt, o.tailLen = o.head+int64(len(buf)-len(tail)), int64(len(tail))
	o.tail = textfit.Ring{}
}

// fileNotice is the line in a file where n bytes were left out, and why.
func fileNotice(n int64, why string) string {
	return fmt.Sprintf("\n[... %d bytes of output left out here: %s ...]\n", n, why)
}

// tailStart returns where the tail starts in the stream (the stream's end while nothing is cut).
func (o *Output) tailStart() int64 {
	switch {
	case o.cut == "":
		return o.total
	case o.tailAt >= 0:
		return o.total - o.tailLen
	}
	return o.total - int64(o.tail.Len())
}

// HasFile reports whether the output has a file, made and not yet removed.
func (o *Output) HasFile() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.file != nil && !o.store.isGone(o.file)
}

// FileInfo says where a task's whole output is: reaper.FileInfo, which it is converted to,
// documents the fields.
type FileInfo struct {
	Path, Cut string
	Missing   int64
	Removed   bool
	NoFile    string
}

// File describes the output's file.
func (o *Output) File() FileInfo {
	o.mu.Lock()
	defer o.mu.Unlock()
	var fi FileInfo
	if o.file == nil {
		if o.total > 0 {
			fi.NoFile = o.noFile
		}
		return fi
	}
	fi.Path, fi.Cut, fi.Removed = o.file.path, o.cut, o.store.isGone(o.file)
	if o.cut != "" {
		fi.Missing = o.tailStart() - o.head
	}
	return fi
}

// Size returns the length of the whole stream so far, what was written once it was not kept
// included.
func (o *Output) Size() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total + o.after
}

// Progress describes a running foreground command: reaper.Progress, which it is converted to,
// documents the fields.
type Progress struct {
	Elapsed      time.Duration
	Bytes, Lines int64
	LastLine     string
}

// Progress describes the output so far, for a progress report.
func (o *Output) Progress(elapsed time.Duration) Progress {
	const n = 4096 // the last bytes looked at for the last line
	o.mu.Lock()
	p := Progress{Elapsed: elapsed, Bytes: o.total, Lines: o.lines}
	o.mu.Unlock()
	tail := o.lastBytes(n)
	tail = bytes.TrimRight(tail, "\n")
	if i := bytes.LastIndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:]
	}
	if len(tail) > 200 {
		tail = tail[:200]
		tail = tail[:len(tail)-textfit.IncompleteSuffix(tail)]
	}
	p.LastLine = textfit.ValidText(tail)
	return p
}

// lastBytes returns up to n of the stream's most recent bytes that are kept (none where they cannot
// be read).
func (o *Output) lastBytes(n int) []byte {
	o.mu.Lock()
	from := max(o.tailStart(), o.total-int64(n))
	if o.cut == "" {
		from = max(0, o.head-int64(n))
	}
	o.mu.Unlock()
	v, err := o.view(from, n)
	if err != nil {
		return nil
	}
	defer v.close()
	w, err := v.kept(nil, from, n, false)
	if err != nil {
		return nil
	}
	return w.front
}
