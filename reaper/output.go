package reaper

import (
	"bytes"
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
	// U+FFFD.
	Text string
	// Offset is where Text starts in the stream; Next is where the following read continues.
	Offset, Next int64
	// Skipped counts bytes between the requested offset and Offset that were dropped to keep the
	// output bounded (the middle of a long stream).
	Skipped int64
	// Total is the length of the whole stream so far, dropped bytes included.
	Total int64
}

// readAt returns the output from offset from (clamped to what exists) to the end, at most max bytes of
// it (max <= 0: no limit) and no more than budget allows, and moves the incremental cursor to where it ends. If partial is true (the
// task still runs), an incomplete UTF-8 sequence at the end is held back for the next read rather
// than turned into U+FFFD.
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
	head, tail := o.head, o.ringBytes(0)
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
	tailStart := o.total - int64(o.rlen)
	var b []byte
	if from < int64(len(o.head)) {
		b = append(b, o.head[from:]...)
		if tailStart == int64(len(o.head)) {
			b = append(b, o.ringBytes(0)...)
		}
	} else {
		if from < tailStart {
			c.Skipped = tailStart - from
			c.Offset = tailStart
		}
		b = o.ringBytes(int(c.Offset - tailStart))
	}
	avail := b
	cut := false
	if max > 0 && len(b) > max {
		b, cut = b[:max], true
	}
	if budget.on() {
		n, _ := budget.prefix(b, budget.Max)
		b = b[:n]
	}
	if partial || cut {
		b = b[:len(b)-incompleteSuffix(b)]
	}
	if len(b) == 0 && len(avail) > 0 && (!partial || utf8.FullRune(avail)) {
		// One character at least (or one invalid byte), or the reader never gets past it; only a
		// character still being written is waited for.
		_, n := utf8.DecodeRune(avail)
		b = avail[:n]
	}
	c.Next = c.Offset + int64(len(b))
	c.Text = validText(b)
	return c
}

// ringBytes returns the ring's valid bytes in stream order, starting skip bytes in.
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
