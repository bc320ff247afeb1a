package taskout

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/cgreaper/reaper/internal/textfit"
)

// Chunk is a piece of a task's output.
type Chunk struct {
	// Text is the output between Offset and Next, as valid UTF-8: each run of invalid bytes became
	// U+FFFD. Where the read passed over bytes that were not kept (the middle of an output larger
	// than the session's output budget), a line in Text stands for them (see Skipped). With
	// OutputOptions.Grep or Tail it holds only the lines selected.
	Text string
	// Offset is where the read started in the stream (the requested offset, clamped to what
	// exists); Next is where the following read continues. Both are byte positions.
	Offset, Next int64
	// Skipped counts the bytes between Offset and Next that were not kept; Text holds a line that
	// says so where they were.
	Skipped int64
	// Pending counts the kept bytes after Next that this read left for the next one, because of
	// its Budget (with Grep: that it did not search). Zero means the read returned all that exists
	// now; a running task may still write more, and a character it has only partly written yet is
	// not counted.
	Pending int64
	// Total is the length of the whole stream so far, dropped bytes included.
	Total int64
	// Lines counts the lines of output Text holds, with Grep or Tail (0 otherwise).
	Lines int
}

// window reads of the kept output: what lies from one offset on, at most n bytes of each part.
type window struct {
	front []byte // from the offset on, in the part it is in
	more  bool   // front stops before its part ends (n bytes)
	gap   int64  // bytes not kept between front and back
	back  []byte // the tail, when front reaches the head's end
}

// keptFrom returns the kept output from offset from on, at most n bytes (n < 0: all) of front and of
// back, read through r.
func (o *Output) keptFrom(r reader, from int64, n int) (window, error) {
	ts := o.tailStart()
	var w window
	var err error
	switch {
	case from >= ts && o.cut != "":
		w.front, err = o.tailBytes(r, from, n)
		w.more = from+int64(len(w.front)) < o.total
	case from < o.head:
		w.front, err = o.headBytes(r, from, n)
		w.more = from+int64(len(w.front)) < o.head
		if !w.more && o.cut != "" && err == nil {
			w.gap = ts - o.head
			w.back, err = o.tailBytes(r, ts, n)
		}
	default: // from in the part that was not kept
		w.gap = ts - from
		w.back, err = o.tailBytes(r, ts, n)
	}
	return w, err
}

// keptAfter returns how many bytes after stream offset p are kept.
func (o *Output) keptAfter(p int64) int64 {
	ts := o.tailStart()
	switch {
	case p >= ts:
		return o.total - p
	case p < o.head:
		return o.head - p + o.total - ts
	}
	return o.total - ts
}

// readAt returns the kept output from offset *from (clamped to what exists; from nil: the incremental
// cursor) on, across the part not kept if the read reaches it (see Chunk), no more than budget
// allows, and moves the incremental cursor to where it ends. If partial is true (the task still
// runs), an incomplete UTF-8 sequence at the end is held back for the next read rather than turned
// into U+FFFD.
func (o *Output) Read(from *int64, partial bool, budget Budget) (Chunk, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, err := o.readLocked(o.fromLocked(from), partial, budget)
	if err == nil {
		o.next = c.Next
	}
	return c, err
}

// fromLocked returns *off, or the incremental cursor where off is nil.
func (o *Output) fromLocked(off *int64) int64 {
	if off != nil {
		return *off
	}
	return o.next
}

func (o *Output) readLocked(from int64, partial bool, budget Budget) (Chunk, error) {
	from = min(max(from, 0), o.total)
	c := Chunk{Offset: from, Total: o.total}
	r, err := o.readerLocked()
	if err != nil {
		return c, err
	}
	defer r.close()
	w, err := o.keptFrom(r, from, budget.Window())
	if err != nil {
		return c, err
	}
	if w.gap == 0 && len(w.back) > 0 {
		// The head and the tail meet: the output reached its file's budget, and nothing has been
		// left out between them yet. They read as one, or a character across the seam would never
		// be got past, and a line would say that 0 bytes were left out.
		w.front, w.back = append(w.front[:len(w.front):len(w.front)], w.back...), nil
	}
	front, back := w.front, w.back
	// n1 and n2: how much of front and of back this read returns, within the budget.
	n1, used := budget.Prefix(front, budget.All())
	n2 := 0
	if n1 == len(front) && !w.more {
		n2, _ = budget.Prefix(back, budget.Rest(used))
	}
	// Hold back a character cut short where the read ends: at a cap, or at the end of a stream
	// still being written. The end of the head before a gap is final: nothing will complete it.
	switch {
	case n2 > 0 && (n2 < len(back) || partial):
		n2 -= textfit.IncompleteSuffix(back[:n2])
	case n2 == 0 && (n1 < len(front) || w.more || partial && w.gap == 0):
		n1 -= textfit.IncompleteSuffix(front[:n1])
	}
	if n1 == 0 && n2 == 0 {
		// One character at least (or one invalid byte), or the reader never gets past it; only a
		// character still being written is waited for.
		switch {
		case len(front) > 0 && (!partial || w.more || w.gap > 0 || utf8.FullRune(front)):
			_, n1 = utf8.DecodeRune(front)
		case len(front) == 0 && len(back) > 0 && (!partial || utf8.FullRune(back)):
			_, n2 = utf8.DecodeRune(back)
		}
	}
	if n2 == 0 && (w.gap == 0 || len(back) > 0) {
		c.Next = from + int64(n1)
		c.Text = textfit.ValidText(front[:n1])
	} else {
		// The read crosses the part not kept (or reaches it, and nothing is kept beyond: the output
		// was discarded): a line stands for it.
		notice := textfit.DropNotice(w.gap)
		if n1 == 0 {
			notice = notice[1:] // no blank line before it at the start
		}
		c.Skipped = w.gap
		c.Next = from + int64(n1) + w.gap + int64(n2)
		c.Text = textfit.JoinText(front[:n1], []byte(notice), back[:n2])
	}
	c.Pending = o.keptAfter(c.Next)
	if partial {
		c.Pending = max(c.Pending-int64(textfit.IncompleteSuffix(o.last[:o.lastN])), 0)
	}
	return c, nil
}

// Whole is a foreground command's output as a result carries it.
type Whole struct {
	// Text is the output as valid UTF-8, within the budget: all of it, or its head and tail with a
	// line between them for what was left out.
	Text string
	// Dropped counts the bytes left out between head and tail; DroppedChars and DroppedLines the
	// characters and lines (see Budget for how characters are counted; newlines for lines).
	Dropped, DroppedChars, DroppedLines int64
	// Total is the length of the whole output, in bytes; Chars and Lines count it too.
	Total, Chars, Lines int64
}

// all returns the whole stream as kept, within budget: the head, a line for what was left out (if
// anything), and the tail. It moves the incremental cursor to the end.
func (o *Output) All(partial bool, budget Budget) (Whole, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	wh := Whole{Total: o.total, Chars: o.chars, Lines: o.lines}
	r, err := o.readerLocked()
	if err != nil {
		return wh, err
	}
	defer r.close()
	head, tail, gap, err := o.ends(r, budget.Window())
	if err != nil {
		return wh, err
	}
	end := o.total
	if partial {
		last := &tail
		if len(tail) == 0 {
			last = &head
		}
		k := textfit.IncompleteSuffix(*last)
		*last = (*last)[:len(*last)-k]
		end -= int64(k)
	}
	front, back, dropped := budget.Fit(head, tail, gap)
	wh.Dropped = dropped
	if dropped > 0 {
		kept := textfit.CountChars(front) + textfit.CountChars(back)
		nl := int64(bytes.Count(front, []byte{'\n'}) + bytes.Count(back, []byte{'\n'}))
		wh.DroppedChars, wh.DroppedLines = max(o.chars-kept, 0), max(o.lines-nl, 0)
		wh.Text = textfit.JoinText(front, []byte(cutNotice(wh)), back)
	} else {
		wh.Text = textfit.JoinText(front, back)
	}
	o.next = end
	return wh, nil
}

// ends returns the first and the last n bytes (n < 0: all) of what is kept, and how many bytes lie
// between them: the whole stream in head where it is kept in one piece within 2n.
func (o *Output) ends(r reader, n int) (head, tail []byte, gap int64, err error) {
	if o.cut == "" && (n < 0 || o.total <= 2*int64(n)) {
		head, err = o.headBytes(r, 0, -1)
		return head, nil, 0, err
	}
	if head, err = o.headBytes(r, 0, n); err != nil {
		return nil, nil, 0, err
	}
	from := int64(len(head))
	if n >= 0 {
		from = max(from, o.total-int64(n))
	}
	if o.cut != "" {
		from = max(from, o.tailStart())
		tail, err = o.tailBytes(r, from, -1)
	} else {
		tail, err = o.headBytes(r, from, -1)
	}
	return head, tail, from - int64(len(head)), err
}

// cutNotice is the line that stands in a result for the middle left out.
func cutNotice(wh Whole) string {
	return fmt.Sprintf("\n[... %d characters (%d lines, %d bytes) left out here ...]\n", wh.DroppedChars, wh.DroppedLines, wh.Dropped)
}
