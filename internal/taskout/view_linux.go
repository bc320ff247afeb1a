package taskout

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cgreaper/reaper/internal/textfit"
)

// A view is what a read needs of an output, taken under the output's lock and read without it, so
// that the pump, the output's end and the store's close never wait for a reader. It holds the layout
// of the kept parts as it was, a descriptor of the file of its own, and a copy of what of its range is
// kept in memory. The file's bytes it reads stay as they were, but for one change: the output's end
// may shorten the head (see endLocked). It says so first (Output.epoch), and a read of the head that
// sees it reads again through a new view (view.kept), at most once, as an output ends once.
type view struct {
	o     *Output
	epoch uint64 // o.epoch when the view was taken
	from  int64  // the range the view was taken for: from, n bytes (n < 0: to the end)
	n     int

	total, head, tailStart int64
	chars, lines           int64 // counted over the whole stream so far (total bytes)
	cut                    bool
	tailAt                 int64 // where the tail starts in the file; -1 while it is in memory
	incomplete             int   // the bytes of a character the stream's end has only partly written

	f         *os.File // the file, opened for this view; nil where the stream has no file
	mem       []byte   // where there is no file: the head from memAt on, copied
	memAt     int64
	tail      []byte // while the tail is in memory: its bytes from tailMemAt on, copied
	tailMemAt int64
}

// errStale is what a read of the head returns when the output's end shortened the head meanwhile.
var errStale = errors.New("the output's layout changed during the read")

// view returns a view of the output for a read of the stream from offset from on, n bytes at most
// of each part (n < 0: to the end). Only bytes in that range are copied from memory: reads through
// the view must stay in it. The caller closes it.
func (o *Output) view(from int64, n int) (*view, error) {
	return o.viewWith(func() (int64, int) { return from, n })
}

// viewWith returns a view for the range that pick, called under the output's lock, returns.
func (o *Output) viewWith(pick func() (from int64, n int)) (*view, error) {
	o.mu.Lock()
	v := o.viewLocked(pick())
	f := o.file
	o.mu.Unlock()
	if f != nil {
		var err error
		if v.f, err = o.store.open(f); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (o *Output) viewLocked(from int64, n int) *view {
	v := &view{
		o: o, epoch: o.epoch.Load(), from: from, n: n,
		total: o.total, head: o.head, tailStart: o.tailStart(), chars: o.chars, lines: o.lines, cut: o.cut != "", tailAt: o.tailAt,
		incomplete: textfit.IncompleteSuffix(o.last[:o.lastN]),
	}
	if o.file == nil && from < o.head {
		v.memAt = max(from, 0)
		v.mem = bytes.Clone(o.mem[v.memAt:end(v.memAt, n, o.head)])
	}
	v.tailMemAt = max(from, v.tailStart)
	if v.cut && v.tailAt < 0 && v.tailMemAt < v.total {
		t := o.tail.View()
		start := v.tailMemAt - v.tailStart
		v.tail = bytes.Clone(t[start:end(start, n, int64(len(t)))])
	}
	return v
}

// end returns the end of n bytes from off (n < 0: limit), at most limit.
func end(off int64, n int, limit int64) int64 {
	if n < 0 {
		return limit
	}
	return min(off+int64(n), limit)
}

// close lets go of the view's descriptor.
func (v *view) close() {
	if v.f != nil {
		v.f.Close()
	}
}

// refresh takes the view again, for the same range.
func (v *view) refresh() error {
	nv, err := v.o.view(v.from, v.n)
	if err != nil {
		return err
	}
	v.close()
	*v = *nv
	return nil
}

// headBytes returns up to n bytes (n < 0: all) of the head from off, which must be in it, read into
// buf where it is large enough.
func (v *view) headBytes(buf []byte, off int64, n int) ([]byte, error) {
	e := end(off, n, v.head)
	if v.f == nil {
		return v.mem[off-v.memAt : e-v.memAt], nil
	}
	b, err := readAt(buf, v.f, off, e-off)
	if err == nil && v.o.epoch.Load() != v.epoch {
		return nil, errStale
	}
	return b, err
}

// tailBytes returns up to n bytes (n < 0: all) of the tail from off, which must be in it, read into
// buf where it is large enough. A tail in the file is there for good: the output has ended.
func (v *view) tailBytes(buf []byte, off int64, n int) ([]byte, error) {
	e := end(off, n, v.total)
	if v.tailAt < 0 {
		return v.tail[off-v.tailMemAt : e-v.tailMemAt], nil
	}
	return readAt(buf, v.f, v.tailAt+off-v.tailStart, e-off)
}

// readAt reads n bytes of f at off, into buf where it is large enough; a file shorter than it was
// written (a root task may truncate it) gives what it has.
func readAt(buf []byte, f *os.File, off, n int64) ([]byte, error) {
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	b := buf[:n]
	k, err := f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("read output file %s: %w", f.Name(), err)
	}
	return b[:k], err
}

// window reads of the kept output: what lies from one offset on, at most n bytes of each part.
type window struct {
	front []byte // from the offset on, in the part it is in
	more  bool   // front stops before its part ends (n bytes)
	gap   int64  // bytes not kept between front and back
	back  []byte // the tail, when front reaches the head's end (and back was asked for)
}

// kept returns the kept output from offset from on, at most n bytes (n < 0: all) of front and, if
// back is set, of back, read into buf (front in its first half, back in its second) where it is
// large enough.
func (v *view) kept(buf []byte, from int64, n int, back bool) (w window, err error) {
	err = v.retried(func() error {
		w, err = v.keptOnce(buf, from, n, back)
		return err
	})
	return w, err
}

// retried runs read, and again through a new view while the output's end shortened the head
// meanwhile (see view): the layout changes once, so a second try sees it as it stays.
func (v *view) retried(read func() error) error {
	for range 3 {
		if err := read(); !errors.Is(err, errStale) {
			return err
		}
		if err := v.refresh(); err != nil {
			return err
		}
	}
	return errStale
}

func (v *view) keptOnce(buf []byte, from int64, n int, back bool) (w window, err error) {
	h := len(buf) / 2
	front, rear := buf[:h:h], buf[h:]
	ts := v.tailStart
	switch {
	case from >= ts && v.cut:
		w.front, err = v.tailBytes(front, from, n)
		w.more = from+int64(len(w.front)) < v.total
	case from < v.head:
		w.front, err = v.headBytes(front, from, n)
		w.more = from+int64(len(w.front)) < v.head
		if !w.more && v.cut && err == nil {
			w.gap = ts - v.head
			if back {
				w.back, err = v.tailBytes(rear, ts, n)
			}
		}
	default: // from in the part that was not kept
		w.gap = ts - from
		if back {
			w.back, err = v.tailBytes(rear, ts, n)
		}
	}
	return w, err
}

// keptAfter returns how many bytes after stream offset p are kept.
func (v *view) keptAfter(p int64) int64 {
	switch {
	case p >= v.tailStart:
		return v.total - p
	case p < v.head:
		return v.head - p + v.total - v.tailStart
	}
	return v.total - v.tailStart
}
