package taskout

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cgreaper/reaper/internal/textfit"
)

// FuzzOutput writes a stream in arbitrary pieces into an output whose file has an arbitrary budget,
// reading it incrementally after each piece (within a budget of at most chars characters, or one that
// prices control characters at six bytes), then whole, after the output ended too. Every text is
// valid UTF-8; the reads cover the stream exactly, each from where the previous one ended, skipped
// bytes included and marked; a read says truly whether kept bytes are pending, an uncapped read of
// the finished stream leaves none, and a reader always gets past a character; the file never exceeds
// its budget; and where nothing had to be cut, no character of the stream is lost, split or repeated,
// and the file holds the stream.
func FuzzOutput(f *testing.F) {
	f.Add([]byte("héllo wörld\n"), []byte{1, 2, 3}, uint16(64), uint8(0), false)
	f.Add([]byte("a\xff\xfeb\xe2\x82"), []byte{2}, uint16(4), uint8(1), false)
	f.Add([]byte("😀😀😀\x00\x01\x02"), []byte{1, 1, 1, 1, 5}, uint16(8), uint8(3), true)
	f.Add([]byte(strings.Repeat("\x1b[31mred\n", 40)), []byte{7, 13}, uint16(30), uint8(0), true)
	st := testStore(f, 1<<20)
	n := 0
	f.Fuzz(func(t *testing.T, stream, cuts []byte, size uint16, chars uint8, costly bool) {
		st.budget, st.tail, st.used, st.done = int64(size%512)+8, int(size%512+8)/4, 0, nil
		n++
		o := st.New("f" + strconv.Itoa(n) + ".out")
		defer st.dir.Remove(o.name)
		budget := Budget{Chars: int(chars)}
		if costly {
			budget = Budget{Max: int(size%512) + 2, Cost: jsonish}
		}
		var got strings.Builder
		var next int64
		read := func(partial bool) {
			for range len(stream) + 2 {
				c, err := o.Read(nil, partial, budget)
				if err != nil {
					t.Fatal(err)
				}
				if !utf8.ValidString(c.Text) {
					t.Fatalf("invalid UTF-8 in %q", c.Text)
				}
				if c.Offset != next || c.Next < c.Offset+c.Skipped || c.Next > c.Total || c.Pending < 0 || c.Pending > c.Total-c.Next {
					t.Fatalf("read after %d: %+v", next, c)
				}
				if !partial && (c.Pending == 0) != (c.Next == c.Total) {
					t.Fatalf("a read of the finished stream said %d bytes pending and ended at %d of %d: %+v", c.Pending, c.Next, c.Total, c)
				}
				if !partial && !budget.On() && c.Pending != 0 {
					t.Fatalf("an uncapped read of the finished stream left %d bytes pending: %+v", c.Pending, c)
				}
				if c.Skipped > 0 && !strings.Contains(c.Text, textfit.DropNotice(c.Skipped)[1:]) {
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
		cut := o.File().Cut != ""
		valid := strings.ToValidUTF8(string(stream), "\uFFFD")
		if !cut && !budget.On() && strip(got.String()) != strip(valid) {
			t.Errorf("incremental reads gave %q for %q", got.String(), stream)
		}
		o.End()
		for _, b := range []Budget{budget, {}} {
			wh, err := o.All(false, b)
			if err != nil || !utf8.ValidString(wh.Text) || wh.Total != int64(len(stream)) || wh.Dropped < 0 || wh.Dropped > wh.Total {
				t.Fatalf("all() = %+v, %v for %d bytes", wh, err, len(stream))
			}
			if !cut && !b.On() && (wh.Text != valid || wh.Dropped != 0) {
				t.Errorf("all() = %q, %d dropped; want %q", wh.Text, wh.Dropped, valid)
			}
		}
		if st.used > st.budget {
			t.Errorf("the file takes %d bytes of a budget of %d", st.used, st.budget)
		}
		if fi := o.File(); fi.Path != "" && !cut && fileOf(t, o) != string(stream) {
			t.Errorf("the file does not hold the stream")
		}
		if p := o.Progress(0); !utf8.ValidString(p.LastLine) || strings.Contains(p.LastLine, "\n") {
			t.Errorf("progress line %q", p.LastLine)
		}
	})
}

// strip removes U+FFFD: how many stand for a run of invalid bytes depends on where reads cut it.
func strip(s string) string {
	return strings.ReplaceAll(s, "\uFFFD", "")
}
