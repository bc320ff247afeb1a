package reaper

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzOutput writes a stream in arbitrary pieces into an output of arbitrary size, reading it
// incrementally after each piece (in reads of at most max bytes, with or without a budget that prices
// control characters at six bytes), then whole. Every text is valid UTF-8; the reads cover the stream
// exactly, each from where the previous one ended, skipped bytes included and marked; a read says
// truly whether kept bytes are pending, an uncapped read of the finished stream leaves none, and a
// reader always gets past a character; and where nothing had to be dropped, no character of the
// stream is lost, split or repeated.
func FuzzOutput(f *testing.F) {
	f.Add([]byte("héllo wörld\n"), []byte{1, 2, 3}, uint16(64), uint8(0), false)
	f.Add([]byte("a\xff\xfeb\xe2\x82"), []byte{2}, uint16(4), uint8(1), false)
	f.Add([]byte("😀😀😀\x00\x01\x02"), []byte{1, 1, 1, 1, 5}, uint16(8), uint8(3), true)
	f.Add([]byte(strings.Repeat("\x1b[31mred\n", 40)), []byte{7, 13}, uint16(30), uint8(0), true)
	f.Fuzz(func(t *testing.T, stream, cuts []byte, size uint16, max uint8, costly bool) {
		limit := int(size%512) + 2
		o := newOutput(limit)
		var budget Budget
		if costly {
			budget = Budget{Max: limit, Cost: func(r rune) int {
				if r < 0x20 {
					return 6
				}
				return utf8.RuneLen(r)
			}}
		}
		var got strings.Builder
		var next int64
		read := func(partial bool) {
			for range len(stream) + 2 {
				c := o.readNext(int(max), partial, budget)
				if !utf8.ValidString(c.Text) {
					t.Fatalf("invalid UTF-8 in %q", c.Text)
				}
				if c.Offset != next || c.Next < c.Offset+c.Skipped || c.Next > c.Total || c.Pending < 0 || c.Pending > c.Total-c.Next {
					t.Fatalf("read after %d: %+v", next, c)
				}
				if !partial && (c.Pending == 0) != (c.Next == c.Total) {
					t.Fatalf("a read of the finished stream said %d bytes pending and ended at %d of %d: %+v", c.Pending, c.Next, c.Total, c)
				}
				if !partial && max == 0 && !costly && c.Pending != 0 {
					t.Fatalf("an uncapped read of the finished stream left %d bytes pending: %+v", c.Pending, c)
				}
				if c.Skipped > 0 && !strings.Contains(c.Text, dropNotice(c.Skipped)[1:]) {
					t.Fatalf("%d bytes skipped and no line says so: %+v", c.Skipped, c)
				}
				if c.Skipped == 0 {
					got.WriteString(c.Text)
				}
				next = c.Next
				if c.Next == c.Offset {
					if c.Pending > 0 {
						t.Fatalf("a read got nowhere with %d bytes pending: %+v", c.Pending, c)
					}
					return // nothing more for now
				}
			}
			t.Fatalf("the reads did not end by %d", next)
		}
		rest := stream
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(n, int(cuts[i])+1)
			}
			o.Write(rest[:n])
			rest = rest[n:]
			read(true)
		}
		read(false)
		if next != int64(len(stream)) {
			t.Fatalf("the reads ended at %d of %d bytes", next, len(stream))
		}
		valid := strings.ToValidUTF8(string(stream), "\uFFFD")
		if len(stream) <= limit && !costly {
			if strip(got.String()) != strip(valid) {
				t.Errorf("incremental reads gave %q for %q", got.String(), stream)
			}
		}
		text, dropped, total := o.all(false, budget)
		if !utf8.ValidString(text) || total != int64(len(stream)) || dropped < 0 || dropped > total {
			t.Fatalf("all() = %q, %d, %d for %d bytes", text, dropped, total, len(stream))
		}
		if len(stream) <= limit && !costly && (text != valid || dropped != 0) {
			t.Errorf("all() = %q, %d dropped; want %q", text, dropped, valid)
		}
		if p := o.progress(0); !utf8.ValidString(p.LastLine) || strings.Contains(p.LastLine, "\n") {
			t.Errorf("progress line %q", p.LastLine)
		}
	})
}

// strip removes U+FFFD: how many stand for a run of invalid bytes depends on where reads cut it.
func strip(s string) string {
	return strings.ReplaceAll(s, "\uFFFD", "")
}
