package reaper

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOutputKeepsHeadAndTail(t *testing.T) {
	o := newOutput(10) // 5 bytes of head, 5 of tail
	o.Write([]byte("0123"))
	o.Write([]byte("45678"))
	if c := o.readAt(0, 0, false, Budget{}); c.Text != "012345678" || c.Next != 9 || c.Skipped != 0 {
		t.Fatalf("before the limit: %+v", c)
	}
	o.Write([]byte("abcdefghij")) // total 19: head 01234, tail fghij, 9 dropped
	text, dropped, total := o.all(false, Budget{})
	if total != 19 || dropped != 9 || !strings.HasPrefix(text, "01234") || !strings.HasSuffix(text, "fghij") ||
		!strings.Contains(text, "9 bytes of output dropped") {
		t.Fatalf("all() = %q, %d, %d", text, dropped, total)
	}
	// Reading from inside the dropped part says how much was skipped.
	if c := o.readAt(7, 0, false, Budget{}); c.Offset != 7 || c.Skipped != 7 || c.Text != "[... 7 bytes of output dropped ...]\nfghij" || c.Next != 19 || c.Pending != 0 {
		t.Errorf("readAt(7) = %+v", c)
	}
	// A read from the head goes on across the dropped middle, with a line in its place.
	if c := o.readAt(3, 0, false, Budget{}); c.Text != "34\n[... 9 bytes of output dropped ...]\nfghij" || c.Skipped != 9 || c.Next != 19 || c.Pending != 0 {
		t.Errorf("readAt(3) = %+v", c)
	}
	// A capped read stops in the head and says how much of what is kept is left: 1 byte of the head
	// and 5 of the tail.
	if c := o.readAt(0, 4, false, Budget{}); c.Text != "0123" || c.Skipped != 0 || c.Next != 4 || c.Pending != 6 {
		t.Errorf("readAt(0, 4) = %+v", c)
	}
	if c := o.readNext(3, false, Budget{}); c.Text != "4\n[... 9 bytes of output dropped ...]\nfg" || c.Skipped != 9 || c.Next != 16 || c.Pending != 3 {
		t.Errorf("the next read of 3 = %+v", c)
	}
	if c := o.readNext(0, false, Budget{}); c.Text != "hij" || c.Offset != 16 || c.Next != 19 || c.Pending != 0 {
		t.Errorf("the rest = %+v", c)
	}
	if c := o.readAt(100, 0, false, Budget{}); c.Offset != 19 || c.Text != "" {
		t.Errorf("readAt past the end = %+v", c)
	}
}

func TestOutputIncremental(t *testing.T) {
	o := newOutput(1 << 10)
	o.Write([]byte("one\n"))
	if c := o.readNext(0, true, Budget{}); c.Text != "one\n" {
		t.Fatalf("first read %+v", c)
	}
	if c := o.readNext(0, true, Budget{}); c.Text != "" || c.Next != 4 {
		t.Fatalf("nothing new: %+v", c)
	}
	o.Write([]byte("two\nthree\n"))
	if c := o.readNext(4, true, Budget{}); c.Text != "two\n" || c.Next != 8 {
		t.Fatalf("capped read %+v", c)
	}
	if c := o.readNext(0, true, Budget{}); c.Text != "three\n" {
		t.Fatalf("rest %+v", c)
	}
	if c := o.readAt(0, 0, true, Budget{}); c.Text != "one\ntwo\nthree\n" {
		t.Fatalf("from offset 0: %+v", c)
	}
}

func TestOutputValidText(t *testing.T) {
	o := newOutput(1 << 10)
	euro := []byte("€") // 3 bytes
	o.Write([]byte("a"))
	o.Write(euro[:2])
	// While the task runs the cut-off rune is held back, not mangled.
	if c := o.readNext(0, true, Budget{}); c.Text != "a" || c.Next != 1 {
		t.Fatalf("partial rune: %+v", c)
	}
	o.Write(euro[2:])
	o.Write([]byte{0xff, 0xfe, 'z', 0})
	c := o.readNext(0, false, Budget{})
	if c.Text != "€\uFFFDz\x00" || !utf8.ValidString(c.Text) {
		t.Fatalf("got %q", c.Text)
	}
	// Once the task has ended a truncated rune is replaced.
	o.Write(euro[:1])
	if c := o.readNext(0, false, Budget{}); c.Text != "\uFFFD" {
		t.Fatalf("final partial rune: %q", c.Text)
	}
}

func TestOutputRingWrapsManyTimes(t *testing.T) {
	o := newOutput(64)
	var all bytes.Buffer
	for i := 0; i < 1000; i++ {
		line := []byte(strings.Repeat(string(rune('a'+i%26)), i%7) + "\n")
		all.Write(line)
		o.Write(line)
	}
	text, dropped, total := o.all(false, Budget{})
	want := all.Bytes()
	if total != int64(len(want)) || dropped != total-64 {
		t.Fatalf("total %d dropped %d, want %d %d", total, dropped, len(want), len(want)-64)
	}
	if !strings.HasPrefix(text, string(want[:32])) || !strings.HasSuffix(text, string(want[len(want)-32:])) {
		t.Fatalf("head or tail wrong: %q", text)
	}
}

// jsonish prices characters roughly as JSON escapes them: control characters six bytes.
func jsonish(r rune) int {
	if r < 0x20 {
		return 6
	}
	return utf8.RuneLen(r)
}

func TestOutputBudget(t *testing.T) {
	budget := Budget{Cost: jsonish, Max: 60}
	// Cheap output within the budget comes back whole.
	o := newOutput(100)
	o.Write([]byte(strings.Repeat("a", 50)))
	if text, dropped, _ := o.all(false, budget); text != strings.Repeat("a", 50) || dropped != 0 {
		t.Fatalf("cheap output: %q, %d dropped", text, dropped)
	}
	// 50 control characters cost 300: about half the budget goes to the start, the rest to the end.
	o = newOutput(100)
	o.Write([]byte("<" + strings.Repeat("\x01", 48) + ">"))
	text, dropped, total := o.all(false, budget)
	front, back, ok := strings.Cut(text, "\n[... ")
	if !ok || total != 50 || !strings.HasPrefix(front, "<\x01") || !strings.HasSuffix(back, "\x01>") {
		t.Fatalf("expensive output: %q", text)
	}
	_, back, _ = strings.Cut(back, "...]\n")
	if kept := len(front) + len(back); int64(kept)+dropped != 50 || budget.cost([]byte(front+back)) > 60 {
		t.Errorf("kept %q and %q, dropped %d of 50: more than the budget, or miscounted", front, back, dropped)
	}
	// With a gap already dropped, the budget cuts into the head and the tail around it.
	o = newOutput(20)
	o.Write([]byte(strings.Repeat("\x02", 40)))
	text, dropped, _ = o.all(false, Budget{Cost: jsonish, Max: 36})
	if strings.Count(text, "\x02") != 6 || dropped != 34 || !strings.Contains(text, "34 bytes of output dropped") {
		t.Errorf("head and tail over budget: %q, %d dropped", text, dropped)
	}
	// Incremental reads stop at the budget and continue where they stopped, never in a character.
	o = newOutput(100)
	o.Write([]byte("\x01€\x01€"))
	var got string
	for range 4 {
		c := o.readNext(0, false, Budget{Cost: jsonish, Max: 6})
		got += c.Text
	}
	if got != "\x01€\x01€" {
		t.Errorf("reads within a budget of 6 gave %q", got)
	}
}

// TestOutputReadsGetOn: a read capped below one character still returns that character (or, for a
// truncated one at the end of a finished stream, U+FFFD), so that a reader always gets on; only a
// character still being written is waited for.
func TestOutputReadsGetOn(t *testing.T) {
	o := newOutput(64)
	o.Write([]byte("é\xe2\x82"))
	if c := o.readNext(1, true, Budget{}); c.Text != "é" || c.Next != 2 {
		t.Fatalf("a 1-byte read of é: %+v", c)
	}
	if c := o.readNext(1, true, Budget{}); c.Text != "" || c.Next != 2 {
		t.Fatalf("a character still being written: %+v", c)
	}
	if c := o.readNext(1, false, Budget{}); c.Text != "\uFFFD" || c.Next != 3 {
		t.Fatalf("the truncated character of a finished stream: %+v", c)
	}
	if c := o.readNext(1, false, Budget{}); c.Text != "\uFFFD" || c.Next != 4 {
		t.Fatalf("its last byte: %+v", c)
	}
}
