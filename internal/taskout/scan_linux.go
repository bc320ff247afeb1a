package taskout

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cgreaper/reaper/internal/textfit"
)

// Line reads: Grep (the lines a pattern matches) and Tail (the last lines). Their work is bounded:
//   - a read searches at most MaxScan bytes of output, scanPiece bytes at a time, through a view;
//   - a line longer than maxLine bytes is taken in pieces of maxLine bytes, each a line of its own,
//     and a pattern's cost is checked before it runs (Compile), so one line's match is bounded;
//   - between lines a limiter stops the search (see limiter);
//   - what a read holds is bounded: its view's copy of the tail (MaxTail at most), a piece, a line,
//     and the lines it returns, within its budget (16 MiB at most).
const (
	// MaxScan bounds the bytes of output one line read searches.
	MaxScan   = 64 << 20
	maxLine   = 64 << 10
	scanPiece = 256 << 10
)

// scanLine is one line found by a scan: its text (without its newline) and where it starts.
type scanLine struct {
	off  int64
	text []byte // valid until the function given the line returns
}

// A scan is one line read's search: through view v, within limits lim, each byte costing cost.
type scan struct {
	v    *view
	lim  *limiter
	cost int64
	buf  []byte // the piece read, reused
}

// lines calls fn for each line of the kept output from offset from to end (at most MaxScan bytes),
// until fn returns false or the limiter stops the search, and returns where it stopped (the start of
// the first line not given to fn), and the bytes passed over that were not kept. Where the stream is
// still being written (partial) its last line without a newline is left for a later read. The part
// not kept ends a line.
func (s *scan) lines(from, end int64, partial bool, fn func(scanLine) bool) (stop, skipped int64, err error) {
	var line []byte
	start, pos := from, from
	// give hands fn a line, once the limiter allows the work of searching it.
	give := func(text []byte) bool {
		if !s.lim.allow((int64(len(text)) + 1) * s.cost) {
			return false
		}
		return fn(scanLine{off: start, text: text})
	}
	flush := func() bool {
		ok := give(line)
		line = line[:0]
		return ok
	}
	for pos < end && pos-from < MaxScan {
		if !s.lim.look() {
			return start, skipped, s.lim.err
		}
		w, err := s.v.kept(s.buf, pos, int(min(scanPiece, end-pos)), false)
		if err != nil {
			return start, skipped, err
		}
		if len(w.front) == 0 && w.gap == 0 {
			break // the file is shorter than it was written (a root task truncated it): no more
		}
		if len(w.front) == 0 {
			// In the part not kept: what was before it ends a line.
			if len(line) > 0 && !flush() {
				return start, skipped, s.lim.err
			}
			pos += w.gap
			skipped += w.gap
			start = pos
			continue
		}
		for b := w.front; len(b) > 0; {
			i := bytes.IndexByte(b, '\n')
			if len(line) == 0 && i >= 0 && i <= maxLine {
				// A whole line in the piece: searched where it is.
				if !give(b[:i]) {
					return start, skipped, s.lim.err
				}
				pos += int64(i) + 1
				b = b[i+1:]
				start = pos
				continue
			}
			part := b
			if i >= 0 {
				part = b[:i]
			}
			if room := maxLine - len(line); len(part) > room {
				part, i = part[:room], -1
			}
			line = append(line, part...)
			pos += int64(len(part))
			b = b[len(part):]
			if i >= 0 {
				pos++ // the newline
				b = b[1:]
			}
			if i >= 0 || len(line) == maxLine {
				if !flush() {
					return start, skipped, s.lim.err
				}
				start = pos
			}
		}
	}
	if len(line) > 0 && pos == end && !partial {
		if !flush() {
			return start, skipped, s.lim.err
		}
		start = pos
	}
	return start, skipped, nil
}

// Grep returns the lines of the kept output from offset *from (nil: the cursor) on that p matches, as
// many as budget allows (a first line that alone exceeds it is cut to fit), and moves the cursor to
// where the read ended: Next is after the last line searched, and Pending counts the kept bytes after
// it. A search stopped by its time or work limit returns what it found, and Chunk.Stopped says why;
// one stopped by ctx or by the store's close returns an error, and leaves the cursor.
func (o *Output) Grep(ctx context.Context, from *int64, partial bool, p *Pattern, budget Budget) (Chunk, error) {
	budget = bounded(budget)
	var off int64
	v, err := o.viewWith(func() (int64, int) {
		off = o.startLocked(from)
		return off, -1
	})
	if err != nil {
		return Chunk{Offset: off}, err
	}
	defer v.close()
	c := Chunk{Offset: off, Total: v.total}
	s := &scan{v: v, lim: o.store.limiter(ctx), cost: p.cost, buf: make([]byte, 2*scanPiece)}
	var out []byte
	left := budget.All()
	stop, skipped, err := s.lines(off, v.total, partial, func(l scanLine) bool {
		if !p.re.Match(l.text) {
			return true
		}
		text := append(l.text[:len(l.text):len(l.text)], '\n')
		n, used := budget.Prefix(text, left)
		if n < len(text) && len(out) > 0 {
			return false // the next read starts with this line
		}
		out = append(out, text[:n]...)
		if n < len(text) {
			out = append(out, '\n')
		}
		left = textfit.Spend{Chars: left.Chars - used.Chars, Cost: left.Cost - used.Cost}
		c.Lines++
		return true
	})
	if err != nil {
		return c, err
	}
	c.Text, c.Next, c.Skipped, c.Stopped = textfit.ValidText(out), stop, skipped, s.lim.stopped
	c.Total, c.Pending = v.total, v.keptAfter(stop) // the view may have been taken again (see view)
	o.setCursor(stop)
	return c, nil
}

// Tail returns the last n lines of the kept output (of those p matches, if p is set), as many of them
// as budget allows, counted from the end (a last line that alone exceeds it keeps its end). It
// searches at most MaxScan bytes back from the end; without p, only what budget could return. It
// moves the cursor to the end. A search that cannot reach the end within its limits returns an error:
// what it found would not be the last lines.
func (o *Output) Tail(ctx context.Context, n int, partial bool, p *Pattern, budget Budget) (Chunk, error) {
	budget = bounded(budget)
	span := int64(MaxScan)
	if w := budget.Window(); p == nil && w >= 0 {
		span = min(span, int64(w)+1) // one byte more: the newline before the first line
	}
	var from int64
	v, err := o.viewWith(func() (int64, int) {
		from = o.backFromLocked(span)
		return max(from-1, 0), -1 // and the byte before: does from start a line?
	})
	if err != nil {
		return Chunk{Offset: from}, err
	}
	defer v.close()
	c := Chunk{Offset: from, Total: v.total}
	s := &scan{v: v, lim: o.store.limiter(ctx), cost: 1, buf: make([]byte, 2*scanPiece)}
	re := p != nil
	if re {
		s.cost = p.cost
	}
	var lines [][]byte
	var held int // bytes in lines
	limit := budget.Window()
	first := from > 0
	stop, skipped, err := s.lines(from, v.total, partial, func(l scanLine) bool {
		if first {
			first = false
			if l.off == from && !v.startsLine(from) {
				return true // the end of a line that began before the search
			}
		}
		if re && !p.re.Match(l.text) {
			return true
		}
		lines = append(lines, append(append(make([]byte, 0, len(l.text)+1), l.text...), '\n'))
		held += len(l.text) + 1
		// Only the last n, and no more than the budget could return.
		for len(lines) > n || limit >= 0 && len(lines) > 1 && held-len(lines[0]) >= limit {
			held -= len(lines[0])
			lines = lines[1:]
		}
		return true
	})
	if err != nil {
		return c, err
	}
	if s.lim.stopped != "" {
		instead := "use a narrower pattern, or grep with an offset"
		if !re {
			instead = "read from an offset instead"
		}
		return c, fmt.Errorf("tail: the search for the last lines stopped at %s, %d bytes before the output's end: %s", s.lim.stopped, v.total-stop, instead)
	}
	c.Text, c.Lines = fitLast(lines, budget)
	c.Next, c.Skipped, c.Total, c.Pending = stop, skipped, v.total, v.keptAfter(stop)
	o.setCursor(stop)
	return c, nil
}

// fitLast returns, as text, the last of lines that fit in budget, and how many: a last line that
// alone does not fit keeps its end.
func fitLast(lines [][]byte, budget Budget) (string, int) {
	left := budget.All()
	i := len(lines)
	for i > 0 {
		n, used := budget.Suffix(lines[i-1], left)
		if n < len(lines[i-1]) {
			if i == len(lines) && n > 0 {
				lines[i-1] = lines[i-1][len(lines[i-1])-n:]
				i--
			}
			break
		}
		left = textfit.Spend{Chars: left.Chars - used.Chars, Cost: left.Cost - used.Cost}
		i--
	}
	return textfit.ValidText(bytes.Join(lines[i:], nil)), len(lines) - i
}

// backFromLocked returns the stream position from which about n kept bytes remain.
func (o *Output) backFromLocked(n int64) int64 {
	if tl := o.total - o.tailStart(); n <= tl {
		return o.total - n
	} else if o.cut != "" {
		return max(0, o.head-(n-tl))
	}
	return max(0, o.total-n)
}

// startsLine reports whether the kept byte before stream position p is a newline (or p starts a
// kept part).
func (v *view) startsLine(p int64) bool {
	if p == v.tailStart && v.cut || p == 0 {
		return true
	}
	w, err := v.kept(nil, p-1, 1, false)
	return err == nil && len(w.front) == 1 && w.front[0] == '\n'
}
