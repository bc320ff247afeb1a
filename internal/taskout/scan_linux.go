package taskout

import (
	"bytes"
	"regexp"

	"github.com/cgreaper/reaper/internal/textfit"
)

// Line reads: task_output's grep (lines that match a regular expression) and tail (the last lines).
// Their work is bounded: a read searches at most maxScan bytes of output, a piece at a time, and a
// line longer than maxLine bytes is taken in pieces of maxLine bytes, each a line of its own.
const (
	maxScan   = 64 << 20
	maxLine   = 64 << 10
	scanPiece = 256 << 10
)

// scanLine is one line found by a scan: its text (without its newline) and where it starts.
type scanLine struct {
	off  int64
	text []byte // valid until the function given the line returns
}

// scan calls fn for each line of the kept output from offset from on, until fn returns false or
// maxScan bytes have been searched, and returns where it stopped (the start of the first line not
// given to fn), and the bytes passed over that were not kept. Where the stream is still being written
// (partial) its last line without a newline is left for a later read. The part not kept ends a line.
func (o *Output) scan(r reader, from int64, partial bool, fn func(scanLine) bool) (stop, skipped int64, err error) {
	var line []byte
	start, pos := from, from
	flush := func() bool {
		ok := fn(scanLine{off: start, text: line})
		line = line[:0]
		return ok
	}
	for pos < o.total && pos-from < maxScan {
		w, err := o.keptFrom(r, pos, scanPiece)
		if err != nil {
			return start, skipped, err
		}
		if len(w.front) == 0 {
			// In the part not kept: what was before it ends a line.
			if len(line) > 0 && !flush() {
				return start, skipped, nil
			}
			pos += w.gap
			skipped += w.gap
			start = pos
			continue
		}
		for b := w.front; len(b) > 0; {
			i := bytes.IndexByte(b, '\n')
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
			switch {
			case i >= 0:
				pos++
				b = b[1:]
				if !flush() {
					return start, skipped, nil
				}
				start = pos
			case len(line) == maxLine:
				if !flush() {
					return start, skipped, nil
				}
				start = pos
			}
		}
	}
	if len(line) > 0 && pos == o.total && !partial {
		if !flush() {
			return start, skipped, nil
		}
		start = pos
	}
	return start, skipped, nil
}

// grepAt returns the lines of the kept output from offset *from (nil: the cursor) on that re matches, as many as budget
// allows (a first line that alone exceeds it is cut to fit), and moves the cursor to where the read
// ended: Next is after the last line searched, and Pending counts the kept bytes after it.
func (o *Output) Grep(at *int64, partial bool, re *regexp.Regexp, budget Budget) (Chunk, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	from := min(max(o.fromLocked(at), 0), o.total)
	c := Chunk{Offset: from, Total: o.total}
	r, err := o.readerLocked()
	if err != nil {
		return c, err
	}
	defer r.close()
	var out []byte
	left := budget.All()
	stop, skipped, err := o.scan(r, from, partial, func(l scanLine) bool {
		if !re.Match(l.text) {
			return true
		}
		text := append(l.text, '\n')
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
	c.Text, c.Next, c.Skipped = textfit.ValidText(out), stop, skipped
	c.Pending = o.keptAfter(stop)
	o.next = stop
	return c, nil
}

// tailLines returns the last n lines of the kept output (of those re matches, if re is set), as many
// of them as budget allows, counted from the end (a last line that alone exceeds it keeps its end).
// It searches at most maxScan bytes back from the end; without re, only what budget could return.
// It moves the cursor to the end.
func (o *Output) Tail(n int, partial bool, re *regexp.Regexp, budget Budget) (Chunk, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	span := int64(maxScan)
	if w := budget.Window(); re == nil && w >= 0 {
		span = min(span, int64(w)+1) // one byte more: the newline before the first line
	}
	from := o.backFrom(span)
	c := Chunk{Offset: from, Total: o.total}
	r, err := o.readerLocked()
	if err != nil {
		return c, err
	}
	defer r.close()
	var lines [][]byte
	var held int // bytes in lines
	limit := budget.Window()
	first := from > 0
	stop, skipped, err := o.scan(r, from, partial, func(l scanLine) bool {
		if first {
			first = false
			if l.off == from && !o.startsLine(r, from) {
				return true // the end of a line that began before the search
			}
		}
		if re != nil && !re.Match(l.text) {
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
	c.Text, c.Lines = fitLast(lines, budget)
	c.Next, c.Skipped, c.Pending = stop, skipped, o.keptAfter(stop)
	o.next = stop
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

// backFrom returns the stream position from which about n kept bytes remain.
func (o *Output) backFrom(n int64) int64 {
	if tl := o.total - o.tailStart(); n <= tl {
		return o.total - n
	} else if o.cut != "" {
		return max(0, o.head-(n-tl))
	}
	return max(0, o.total-n)
}

// startsLine reports whether the kept byte before stream position p is a newline (or p starts a
// kept part).
func (o *Output) startsLine(r reader, p int64) bool {
	if p == o.tailStart() && o.cut != "" || p == 0 {
		return true
	}
	var b []byte
	if p <= o.head {
		b, _ = o.headBytes(r, p-1, 1)
	} else {
		b, _ = o.tailBytes(r, p-1, 1)
	}
	return len(b) == 1 && b[0] == '\n'
}
