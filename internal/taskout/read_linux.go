package taskout

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/cgreaper/reaper/internal/textfit"
)

// Chunk is a piece of a task's output, field for field the reaper.Chunk that documents it (which
// it is converted to). Pending leaves out a character only partly written yet; Stopped names the
// limit (see limiter) that stopped a line read.
type Chunk struct {
	Text                                  string
	Offset, Next, Skipped, Pending, Total int64
	Stopped                               string
	Lines                                 int
}

// Read returns the kept output from offset *from (clamped to what exists; from nil: the incremental
// cursor) on, across the part not kept if the read reaches it (see Chunk), no more than budget
// allows, and moves the incremental cursor to where it ends. If partial is true (the task still
// runs), an incomplete UTF-8 sequence at the end is held back for the next read rather than turned
// into U+FFFD. Its work is bounded by the budget's window, not by the output.
func (o *Output) Read(from *int64, partial bool, budget Budget) (Chunk, error) {
	budget = bounded(budget)
	var off int64
	v, err := o.viewWith(func() (int64, int) {
		off = o.startLocked(from)
		return off, budget.Window()
	})
	if err != nil {
		return Chunk{Offset: off}, err
	}
	defer v.close()
	c, err := v.read(off, partial, budget)
	if err == nil {
		o.setCursor(c.Next)
	}
	return c, err
}

// startLocked returns *from, or the incremental cursor where from is nil, clamped to the stream.
func (o *Output) startLocked(from *int64) int64 {
	off := o.next
	if from != nil {
		off = *from
	}
	return min(max(off, 0), o.total)
}

// setCursor moves the incremental cursor to p.
func (o *Output) setCursor(p int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next = p
}

func (v *view) read(from int64, partial bool, budget Budget) (Chunk, error) {
	c := Chunk{Offset: from, Total: v.total}
	w, err := v.kept(nil, from, budget.Window(), true)
	if err != nil {
		return c, err
	}
	c.Total = v.total
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
	c.Pending = v.keptAfter(c.Next)
	if partial {
		c.Pending = max(c.Pending-int64(v.incomplete), 0)
	}
	return c, nil
}

// Whole is a foreground command's output as a result carries it: reaper.Result documents the
// fields (Text is its Output).
type Whole struct {
	Text                                              string
	Dropped, DroppedChars, DroppedLines, Total, Lines int64
}

// All returns the whole stream as kept, within budget: the head, a line for what was left out (if
// anything), and the tail. It moves the incremental cursor to the end. Its work is bounded by the
// budget's window, not by the output.
func (o *Output) All(partial bool, budget Budget) (Whole, error) {
	budget = bounded(budget)
	v, err := o.view(0, -1)
	if err != nil {
		return Whole{}, err
	}
	defer v.close()
	var head, tail []byte
	var gap int64
	err = v.retried(func() (err error) {
		head, tail, gap, err = v.ends(budget.Window())
		return err
	})
	wh := Whole{Total: v.total, Lines: v.lines}
	if err != nil {
		return wh, err
	}
	end := v.total
	if partial {
		last := &tail
		if len(tail) == 0 {
			last = &head
		}
		k := textfit.IncompleteSuffix(*last)
		*last = (*last)[:len(*last)-k]
		end -= int64(k)
	}
	// The line that stands for the middle counts within the budget: room is left for it, as long
	// as the line with the largest numbers the cut can give.
	room := budget.Measure([]byte(cutNotice(Whole{DroppedChars: v.chars, DroppedLines: v.lines, Dropped: v.total})))
	front, back, dropped := budget.Fit(head, tail, gap, room)
	wh.Dropped = dropped
	if dropped > 0 {
		kept := textfit.CountChars(front) + textfit.CountChars(back)
		nl := int64(bytes.Count(front, []byte{'\n'}) + bytes.Count(back, []byte{'\n'}))
		wh.DroppedChars, wh.DroppedLines = max(v.chars-kept, 0), max(v.lines-nl, 0)
		wh.Text = textfit.JoinText(front, []byte(cutNotice(wh)), back)
	} else {
		wh.Text = textfit.JoinText(front, back)
	}
	o.setCursor(end)
	return wh, nil
}

// ends returns the first and the last n bytes (n < 0: all) of what is kept, and how many bytes lie
// between them: the whole stream in head where it is kept in one piece within 2n.
func (v *view) ends(n int) (head, tail []byte, gap int64, err error) {
	if !v.cut && (n < 0 || v.total <= 2*int64(n)) {
		head, err = v.headBytes(nil, 0, -1)
		return head, nil, 0, err
	}
	if head, err = v.headBytes(nil, 0, n); err != nil {
		return nil, nil, 0, err
	}
	from := int64(len(head))
	if n >= 0 {
		from = max(from, v.total-int64(n))
	}
	if v.cut {
		from = max(from, v.tailStart)
		tail, err = v.tailBytes(nil, from, -1)
	} else {
		tail, err = v.headBytes(nil, from, -1)
	}
	return head, tail, from - int64(len(head)), err
}

// cutNotice is the line that stands in a result for the middle left out.
func cutNotice(wh Whole) string {
	return fmt.Sprintf("\n[... %d characters (%d lines, %d bytes) left out here ...]\n", wh.DroppedChars, wh.DroppedLines, wh.Dropped)
}

// maxRead bounds what one read holds, whatever its budget: a zero Budget reads at most this much.
const maxRead = 16 << 20

// bounded returns b, or where b caps nothing, a cap of maxRead bytes.
func bounded(b Budget) Budget {
	if b.On() {
		return b
	}
	return Budget{Max: maxRead, Cost: utf8.RuneLen}
}
