package reaper

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// output keeps a task's combined stdout and stderr within a fixed budget: the first half of the budget
// holds the head of the stream, the second half a ring of its most recent bytes, and whatever falls
// between is counted but dropped. Offsets are positions in the whole stream, so a reader that falls
// behind learns exactly how much it missed. Nothing here splits on lines: a 10 MB line is just bytes.
type output struct {
	// mu guards the fields that follow.
	mu    sync.Mutex
	half  int    // the head's capacity; the ring gets the rest of the budget
	limit int    // the whole budget
	head  []byte // the stream's first bytes, up to half; grown as needed
	ring  []byte // the stream's last bytes, circular, allocated once head is full
	rpos  int    // where the next byte goes in ring
	rlen  int    // valid bytes in ring
	total int64  // bytes written to the stream so far
	lines int64  // newlines written so far
	next  int64  // the cursor of incremental reads: where the previous read ended
	gone  bool   // discard: nobody will read the stream again; only count it
}

// newOutput returns an empty stream that keeps limit bytes, which must be positive.
func newOutput(limit int) *output {
	return &output{half: limit / 2, limit: limit}
}

// Write appends p to the stream; it never fails and never blocks on a reader.
func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	o.total += int64(n)
	o.lines += int64(bytes.Count(p, []byte{'\n'}))
	if o.gone {
		return n, nil
	}
	if room := o.half - len(o.head); room > 0 {
		k := min(room, len(p))
		o.head = append(o.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || o.limit == o.half {
		return n, nil
	}
	if o.ring == nil {
		o.ring = make([]byte, o.limit-o.half)
	}
	if len(p) > len(o.ring) {
		p = p[len(p)-len(o.ring):]
	}
	for len(p) > 0 {
		k := copy(o.ring[o.rpos:], p)
		p = p[k:]
		o.rpos = (o.rpos + k) % len(o.ring)
		o.rlen = min(o.rlen+k, len(o.ring))
	}
	return n, nil
}

// discard frees the buffers: the stream is only counted from now on. A finished foreground
// command's output has been returned; what its leftover processes write later is not kept.
func (o *output) discard() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gone, o.head, o.ring, o.rlen, o.rpos = true, nil, nil, 0, 0
	o.next = o.total
}

// Chunk is a piece of a task's output.
type Chunk struct {
	// Text is the output between Offset and Next, as valid UTF-8: each run of invalid bytes became
	// U+FFFD. Where the read passed over bytes dropped to keep the output bounded (the middle of a
	// long stream), a line in Text stands for them (see Skipped).
	Text string
	// Offset is where the read started in the stream (the requested offset, clamped to what
	// exists); Next is where the following read continues.
	Offset, Next int64
	// Skipped counts the bytes between Offset and Next that were dropped to keep the output
	// bounded; Text holds a line that says so where they were.
	Skipped int64
	// Pending counts the kept bytes after Next that this read left for the next one, because of
	// its cap (OutputOptions.Max or Budget). Zero means the read returned all that exists now; a
	// running task may still write more, and a character it has only partly written yet is not
	// counted.
	Pending int64
	// Total is the length of the whole stream so far, dropped bytes included.
	Total int64
}

// readAt returns the kept output from offset from (clamped to what exists) to the end, across the
// dropped middle if the read reaches it (see Chunk), at most max bytes of it (max <= 0: no limit) and
// no more than budget allows, and moves the incremental cursor to where it ends. If partial is true
// (the task still runs), an incomplete UTF-8 sequence at the end is held back for the next read
// rather than turned into U+FFFD.
func (o *output) readAt(from int64, max int, partial bool, budget Budget) Chunk {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.readLocked(from, max, partial, budget)
	o.next = c.Next
	return c
}

// readNext is readAt from the incremental cursor.
func (o *output) readNext(max int, partial bool, budget Budget) Chunk {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.readLocked(o.next, max, partial, budget)
	o.next = c.Next
	return c
}

// all returns the whole stream as it is kept, within budget: the head, a line that says how many bytes
// were dropped (if any), and the tail. It moves the incremental cursor to the end.
func (o *output) all(partial bool, budget Budget) (text string, dropped, total int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gone {
		return "", 0, o.total
	}
	tailStart := o.total - int64(o.rlen)
	head, tail := o.head, o.ringView()
	gap := tailStart - int64(len(head))
	end := o.total
	if partial {
		last := &tail
		if len(tail) == 0 {
			last = &head
		}
		k := incompleteSuffix(*last)
		*last = (*last)[:len(*last)-k]
		end -= int64(k)
	}
	text, dropped = budget.fit(head, tail, gap)
	o.next = end
	return text, dropped, o.total
}

func (o *output) readLocked(from int64, max int, partial bool, budget Budget) Chunk {
	from = min(max64(from, 0), o.total)
	c := Chunk{Offset: from, Total: o.total}
	front, gap, back := o.keptFrom(from)
	// n1 and n2: how much of front and of back this read returns, within max and the budget.
	room := len(front) + len(back)
	if max > 0 {
		room = min(room, max)
	}
	n1 := min(len(front), room)
	n2 := min(len(back), room-n1)
	if budget.on() {
		var spent int
		n1, spent = budget.prefix(front[:n1], budget.Max)
		if n1 < len(front) {
			n2 = 0
		} else {
			n2, _ = budget.prefix(back[:n2], budget.Max-spent)
		}
	}
	// Hold back a character cut short where the read ends: at a cap, or at the end of a stream
	// still being written. The end of the head before a gap is final: nothing will complete it.
	switch {
	case n2 > 0 && (n2 < len(back) || partial):
		n2 -= incompleteSuffix(back[:n2])
	case n2 == 0 && (n1 < len(front) || partial && gap == 0):
		n1 -= incompleteSuffix(front[:n1])
	}
	if n1 == 0 && n2 == 0 {
		// One character at least (or one invalid byte), or the reader never gets past it; only a
		// character still being written is waited for.
		switch {
		case len(front) > 0 && (!partial || gap > 0 || utf8.FullRune(front)):
			_, n1 = utf8.DecodeRune(front)
		case len(front) == 0 && len(back) > 0 && (!partial || utf8.FullRune(back)):
			_, n2 = utf8.DecodeRune(back)
		}
	}
	last := front
	if gap > 0 {
		last = back
	}
	c.Pending = int64(len(front) - n1 + len(back) - n2)
	if partial {
		c.Pending = max64(c.Pending-int64(incompleteSuffix(last)), 0)
	}
	if n2 == 0 && (gap == 0 || len(back) > 0) {
		c.Next = from + int64(n1)
		c.Text = validText(front[:n1])
		return c
	}
	// The read crosses the dropped middle (or reaches it, and nothing is kept beyond: the output was
	// discarded): a line stands for it.
	notice := dropNotice(gap)
	if n1 == 0 {
		notice = notice[1:] // no blank line before it at the start
	}
	c.Skipped = gap
	c.Next = from + int64(n1) + gap + int64(n2)
	c.Text = joinText(front[:n1], []byte(notice), back[:n2])
	return c
}

// keptFrom returns the kept output from offset from on: front, then gap bytes that were dropped,
// then back. Where nothing was dropped past from, gap is 0 and back is empty. Both may share the
// buffers' memory: they are valid while o.mu is held.
func (o *output) keptFrom(from int64) (front []byte, gap int64, back []byte) {
	head := int64(len(o.head))
	tailStart := o.total - int64(o.rlen)
	switch {
	case from >= tailStart:
		return o.ringView()[from-tailStart:], 0, nil
	case from < head && tailStart == head:
		// Contiguous: the head, then the ring, in one slice, for characters that straddle them.
		if o.rlen == 0 {
			return o.head[from:], 0, nil
		}
		b := make([]byte, 0, head-from+int64(o.rlen))
		b = append(b, o.head[from:]...)
		return append(b, o.ringView()...), 0, nil
	case from < head:
		return o.head[from:], tailStart - head, o.ringView()
	default: // from in the dropped middle
		return nil, tailStart - from, o.ringView()
	}
}

// ringView returns the ring's valid bytes in stream order, in the ring's own memory: it first
// rotates the ring in place, if need be, so that they start at its beginning. A read of the tail
// then copies it once, into the text it returns, and a finished task's ring is rotated at most once.
func (o *output) ringView() []byte {
	if o.rlen == 0 {
		return nil
	}
	if start := (o.rpos - o.rlen + len(o.ring)) % len(o.ring); start != 0 {
		slices.Reverse(o.ring[:start])
		slices.Reverse(o.ring[start:])
		slices.Reverse(o.ring)
		o.rpos = o.rlen % len(o.ring)
	}
	return o.ring[:o.rlen]
}

// ringBytes returns the ring's valid bytes in stream order, starting skip bytes in, in a new slice.
func (o *output) ringBytes(skip int) []byte {
	if o.rlen == 0 || skip >= o.rlen {
		return nil
	}
	start := (o.rpos - o.rlen + len(o.ring)) % len(o.ring)
	start = (start + skip) % len(o.ring)
	n := o.rlen - skip
	out := make([]byte, 0, n)
	first := min(n, len(o.ring)-start)
	out = append(out, o.ring[start:start+first]...)
	return append(out, o.ring[:n-first]...)
}

// incompleteSuffix returns the length of a UTF-8 sequence cut off at the end of b (0 to 3 bytes).
func incompleteSuffix(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return 0 // ASCII: nothing pending
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// validText converts output bytes to valid UTF-8: each run of invalid bytes becomes one U+FFFD.
func validText(b []byte) string {
	if utf8.Valid(b) { // far faster than ToValidUTF8's own scan, which finds nothing to replace
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// size returns the length of the whole stream so far.
func (o *output) size() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// lastBytes returns up to n of the most recent bytes of the stream.
func (o *output) lastBytes(n int) []byte {
	if o.rlen == 0 {
		return o.head[len(o.head)-min(n, len(o.head)):]
	}
	return o.ringBytes(max(0, o.rlen-n))
}

// Progress describes a running foreground command.
type Progress struct {
	Elapsed time.Duration
	// Bytes and Lines count the output so far (lines by newlines seen).
	Bytes, Lines int64
	// LastLine is the last complete line of output, cut to 200 bytes.
	LastLine string
}

// progress describes the output so far, for a progress report.
func (o *output) progress(elapsed time.Duration) Progress {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := Progress{Elapsed: elapsed, Bytes: o.total, Lines: o.lines}
	tail := o.lastBytes(4096)
	tail = bytes.TrimRight(tail, "\n")
	if i := bytes.LastIndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:]
	}
	if len(tail) > 200 {
		tail = tail[:200]
		tail = tail[:len(tail)-incompleteSuffix(tail)]
	}
	p.LastLine = validText(tail)
	return p
}
