package taskout

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cgreaper/reaper/internal/safefs"
	"github.com/cgreaper/reaper/internal/textfit"
)

// testStore returns a store of output files in a directory of the test's, within budget bytes
// (tail: a quarter of it, at most MaxTail); budget 0 keeps outputs in memory only.
func testStore(t testing.TB, budget int64) *Store {
	t.Helper()
	if budget == 0 {
		return NewStore(Options{Budget: 1 << 20, Tail: MaxTail})
	}
	dir, err := safefs.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	return NewStore(Options{Dir: dir, Budget: budget})
}

// fileOf returns what the output's file holds.
func fileOf(t testing.TB, o *Output) string {
	t.Helper()
	b, err := os.ReadFile(o.File().Path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func read(t testing.TB, o *Output, from *int64, partial bool, b Budget) Chunk {
	t.Helper()
	c, err := o.Read(from, partial, b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func whole(t testing.TB, o *Output, b Budget) Whole {
	t.Helper()
	wh, err := o.All(false, b)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

// TestOutputFile: the whole stream goes into the file, which reads see; a stream that printed nothing
// has no file.
func TestOutputFile(t *testing.T) {
	st := testStore(t, 1<<20)
	empty := st.New("empty.out")
	empty.End()
	if fi := empty.File(); fi.Path != "" || fi.NoFile != "" {
		t.Errorf("an output that printed nothing: %+v", fi)
	}
	o := st.New("t.out")
	var want bytes.Buffer
	for i := range 5000 {
		line := strconv.Itoa(i) + " é\n"
		want.WriteString(line)
		o.Write([]byte(line))
	}
	if c := read(t, o, offset(0), true, Budget{}); c.Text != want.String() || c.Next != int64(want.Len()) || c.Pending != 0 {
		t.Fatalf("one read of the whole stream: %d bytes, next %d, pending %d", len(c.Text), c.Next, c.Pending)
	}
	o.End()
	if got := fileOf(t, o); got != want.String() {
		t.Fatalf("the file holds %d bytes, want the %d of the stream", len(got), want.Len())
	}
	// A read after the end goes through a descriptor opened for it.
	if c := read(t, o, offset(5), false, Budget{Chars: 4}); c.Text != "1 é\n" || c.Next != 10 || c.Pending != int64(want.Len())-10 {
		t.Fatalf("read of 4 characters from 6: %+v", c)
	}
	fi := o.File()
	if fi.Cut != "" || fi.Missing != 0 || fi.Removed || !strings.HasSuffix(fi.Path, "/t.out") {
		t.Errorf("file info %+v", fi)
	}
}

// TestOutputBudgetCut: a stream larger than the budget keeps its head in the file and its tail in
// memory, then both in the file, within the budget, with a line that says what was left out.
func TestOutputBudgetCut(t *testing.T) {
	const budget = 64 << 10 // a tail of 16 KiB
	st := testStore(t, budget)
	o := st.New("big.out")
	var want bytes.Buffer
	for i := 0; want.Len() < 1<<20; i++ {
		line := strconv.Itoa(i) + "\n"
		want.WriteString(line)
		o.Write([]byte(line))
	}
	total := int64(want.Len())
	fi := o.File()
	if fi.Cut == "" || !strings.Contains(fi.Cut, "64 KiB") || fi.Missing != total-budget-16<<10 {
		t.Fatalf("cut %q, missing %d of %d", fi.Cut, fi.Missing, total)
	}
	// A read from the head crosses the gap with a line for it.
	c := read(t, o, offset(budget-10), true, Budget{})
	if c.Skipped != fi.Missing || !strings.Contains(c.Text, textfit.DropNotice(fi.Missing)) || c.Next != total {
		t.Fatalf("read across the gap: skipped %d, next %d", c.Skipped, c.Next)
	}
	o.End()
	file := fileOf(t, o)
	if int64(len(file)) > budget {
		t.Errorf("the file holds %d bytes, over the budget of %d", len(file), budget)
	}
	fi = o.File()
	head := want.String()[:total-16<<10-fi.Missing]
	notice := fileNotice(fi.Missing, fi.Cut)
	if !strings.HasPrefix(file, head) || file[len(head):len(head)+len(notice)] != notice || !strings.HasSuffix(file, want.String()[total-16<<10:]) {
		t.Fatalf("the file is not head, notice, tail: %d bytes, starts %q, notice %q", len(file), file[:20], notice)
	}
	// The head gave up its end to the tail: reads of what is kept, from anywhere, match the stream.
	for _, from := range []int64{0, 100, int64(len(head)) - 3, int64(len(head)) + 5, total - 100} {
		c := read(t, o, offset(from), false, Budget{})
		got := c.Text
		if c.Skipped > 0 {
			got = strings.Replace(got, strings.TrimPrefix(textfit.DropNotice(c.Skipped), map[bool]string{true: "\n"}[from >= int64(len(head))]), "", 1)
		}
		kept := want.String()[:len(head)] + want.String()[total-16<<10:]
		start := from
		if from > int64(len(head)) {
			start = int64(len(head)) + max(0, from-(total-16<<10))
		}
		if got != kept[start:] {
			t.Errorf("read from %d: %d bytes that are not what is kept from there", from, len(got))
		}
	}
	wh := whole(t, o, Budget{Chars: 100})
	notice = cutNotice(wh)
	if wh.Total != total || wh.Lines != int64(bytes.Count(want.Bytes(), []byte{'\n'})) ||
		!strings.HasPrefix(wh.Text, "0\n1\n") || !strings.HasSuffix(wh.Text, want.String()[total-10:]) ||
		len(wh.Text) > 100 || wh.DroppedChars != total-int64(len(wh.Text)-len(notice)) || wh.DroppedLines < 1000 || !strings.Contains(wh.Text, notice) {
		t.Errorf("all within 100 characters, the line for the middle included: %d characters, %+v", len(wh.Text), wh)
	}
}

// TestOutputEviction: finished outputs make room for newer ones, oldest first; a read of one that
// went says why.
func TestOutputEviction(t *testing.T) {
	st := testStore(t, 100<<10)
	old := st.New("old.out")
	old.Write(bytes.Repeat([]byte("o"), 60<<10))
	old.End()
	running := st.New("run.out")
	running.Write(bytes.Repeat([]byte("r"), 30<<10))
	newer := st.New("new.out")
	newer.Write(bytes.Repeat([]byte("n"), 30<<10)) // 120 KiB: the old file goes
	if fi := old.File(); !fi.Removed {
		t.Fatalf("the old file was not removed: %+v", fi)
	}
	if _, err := os.Stat(old.File().Path); !os.IsNotExist(err) {
		t.Errorf("the old file is still there: %v", err)
	}
	if _, err := old.Read(offset(0), false, Budget{}); !errors.Is(err, ErrRemoved) {
		t.Errorf("a read of the removed file: %v", err)
	}
	// Running outputs are never removed: the one that does not fit is cut.
	newer.Write(bytes.Repeat([]byte("m"), 160<<10))
	if fi := running.File(); fi.Removed || fi.Cut != "" {
		t.Errorf("the running output: %+v", fi)
	}
	if fi := newer.File(); fi.Cut == "" || fi.Missing == 0 {
		t.Errorf("the output that did not fit: %+v", fi)
	}
	if st.used > st.budget {
		t.Errorf("%d bytes used of %d", st.used, st.budget)
	}
}

// TestOutputMemoryOnly: without a file, the head and the tail are kept in memory.
func TestOutputMemoryOnly(t *testing.T) {
	st := testStore(t, 0)
	o := st.New("x.out")
	o.Write(bytes.Repeat([]byte("a"), MaxTail/2))
	o.Write(bytes.Repeat([]byte("b"), MaxTail))
	o.Write([]byte("end"))
	fi := o.File()
	if fi.Path != "" || fi.NoFile == "" {
		t.Fatalf("file info %+v", fi)
	}
	wh := whole(t, o, Budget{})
	if !strings.HasPrefix(wh.Text, "aaa") || !strings.HasSuffix(wh.Text, "bend") || wh.Dropped != MaxTail+3-MaxTail/2 {
		t.Errorf("head and tail in memory: %d dropped, %d bytes", wh.Dropped, len(wh.Text))
	}
}

func TestOutputIncremental(t *testing.T) {
	o := testStore(t, 1<<20).New("x.out")
	o.Write([]byte("one\n"))
	if c := read(t, o, nil, true, Budget{}); c.Text != "one\n" {
		t.Fatalf("first read %+v", c)
	}
	if c := read(t, o, nil, true, Budget{}); c.Text != "" || c.Next != 4 {
		t.Fatalf("nothing new: %+v", c)
	}
	o.Write([]byte("two\nthree\n"))
	if c := read(t, o, nil, true, Budget{Chars: 4}); c.Text != "two\n" || c.Next != 8 || c.Pending != 6 {
		t.Fatalf("capped read %+v", c)
	}
	if c := read(t, o, nil, true, Budget{}); c.Text != "three\n" {
		t.Fatalf("rest %+v", c)
	}
	if c := read(t, o, offset(0), true, Budget{}); c.Text != "one\ntwo\nthree\n" {
		t.Fatalf("from offset 0: %+v", c)
	}
}

func TestOutputValidText(t *testing.T) {
	o := testStore(t, 1<<20).New("x.out")
	euro := []byte("€") // 3 bytes
	o.Write([]byte("a"))
	o.Write(euro[:2])
	// While the task runs the cut-off rune is held back, not mangled.
	if c := read(t, o, nil, true, Budget{}); c.Text != "a" || c.Next != 1 || c.Pending != 0 {
		t.Fatalf("partial rune: %+v", c)
	}
	o.Write(euro[2:])
	o.Write([]byte{0xff, 0xfe, 'z', 0})
	c := read(t, o, nil, false, Budget{})
	if c.Text != "€\uFFFDz\x00" || !utf8.ValidString(c.Text) {
		t.Fatalf("got %q", c.Text)
	}
	// Once the task has ended a truncated rune is replaced.
	o.Write(euro[:1])
	if c := read(t, o, nil, false, Budget{}); c.Text != "\uFFFD" {
		t.Fatalf("final partial rune: %q", c.Text)
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
	budget := Budget{Cost: jsonish, Max: 200}
	st := testStore(t, 1<<20)
	// Cheap output within the budget comes back whole.
	o := st.New("a.out")
	o.Write([]byte(strings.Repeat("a", 50)))
	if wh := whole(t, o, budget); wh.Text != strings.Repeat("a", 50) || wh.Dropped != 0 {
		t.Fatalf("cheap output: %+v", wh)
	}
	// 50 control characters cost 300: about half of the budget left beside the line for the middle
	// goes to the start, the rest to the end, and the whole stays within the budget.
	o = st.New("b.out")
	o.Write([]byte("<" + strings.Repeat("\x01", 48) + ">"))
	wh := whole(t, o, budget)
	front, back, ok := strings.Cut(wh.Text, "\n[... ")
	if !ok || wh.Total != 50 || !strings.HasPrefix(front, "<\x01") || !strings.HasSuffix(back, "\x01>") {
		t.Fatalf("expensive output: %q", wh.Text)
	}
	_, back, _ = strings.Cut(back, "...]\n")
	if kept := len(front) + len(back); int64(kept)+wh.Dropped != 50 || int64(kept)+wh.DroppedChars != 50 || budget.Measure([]byte(wh.Text)).Cost > budget.Max {
		t.Errorf("kept %q and %q, dropped %d of 50: more than the budget, or miscounted", front, back, wh.Dropped)
	}
	// Characters: head and tail of 80 of them, the line for the middle included, in one read.
	o = st.New("c.out")
	o.Write([]byte(strings.Repeat("é", 60) + strings.Repeat("x", 60)))
	wh = whole(t, o, Budget{Chars: 80})
	front, back, _ = strings.Cut(wh.Text, "\n[... ")
	_, back, _ = strings.Cut(back, "...]\n")
	if n := utf8.RuneCountInString(wh.Text); n > 80 || front == "" || strings.Trim(front, "é") != "" || back == "" || strings.Trim(back, "x") != "" ||
		wh.DroppedChars != 120-int64(utf8.RuneCountInString(front+back)) {
		t.Errorf("80 characters of 120: %d, %+v", n, wh)
	}
	// Incremental reads stop at the budget and continue where they stopped, never in a character.
	o = st.New("d.out")
	o.Write([]byte("\x01€\x01€"))
	var got string
	for range 4 {
		got += read(t, o, nil, false, Budget{Cost: jsonish, Max: 6}).Text
	}
	if got != "\x01€\x01€" {
		t.Errorf("reads within a budget of 6 gave %q", got)
	}
}

// TestOutputReadsGetOn: a read capped below one character still returns that character (or, for a
// truncated one at the end of a finished stream, U+FFFD), so that a reader always gets on; only a
// character still being written is waited for.
func TestOutputReadsGetOn(t *testing.T) {
	o := testStore(t, 1<<20).New("x.out")
	o.Write([]byte("é\xe2\x82"))
	tiny := Budget{Cost: jsonish, Max: 1}
	if c := read(t, o, nil, true, tiny); c.Text != "é" || c.Next != 2 {
		t.Fatalf("a 1-byte read of é: %+v", c)
	}
	if c := read(t, o, nil, true, tiny); c.Text != "" || c.Next != 2 {
		t.Fatalf("a character still being written: %+v", c)
	}
	if c := read(t, o, nil, false, tiny); c.Text != "\uFFFD" || c.Next != 3 {
		t.Fatalf("the truncated character of a finished stream: %+v", c)
	}
	if c := read(t, o, nil, false, tiny); c.Text != "\uFFFD" || c.Next != 4 {
		t.Fatalf("its last byte: %+v", c)
	}
}

// TestOutputLines: grep returns the lines that match, from the cursor or an offset, within the
// budget, and continues where it stopped; tail the last lines, of those that match with grep.
func TestOutputLines(t *testing.T) {
	o := testStore(t, 1<<20).New("x.out")
	for i := 1; i <= 1000; i++ {
		line := "line " + strconv.Itoa(i)
		if i%100 == 0 {
			line += " ERROR"
		}
		o.Write([]byte(line + "\n"))
	}
	o.Write([]byte("partial ERROR")) // no newline yet
	errs := mustCompile(t, `ERROR`)
	ctx := context.Background()
	c, err := o.Grep(ctx, nil, true, errs, Budget{Chars: 40})
	if err != nil || c.Text != "line 100 ERROR\nline 200 ERROR\n" || c.Lines != 2 || c.Pending == 0 {
		t.Fatalf("grep within 40 characters: %+v, %v", c, err)
	}
	c, err = o.Grep(ctx, nil, true, errs, Budget{})
	if err != nil || c.Lines != 8 || !strings.HasPrefix(c.Text, "line 300 ERROR\n") || strings.Contains(c.Text, "partial") {
		t.Fatalf("grep of the rest, the last line still being written: %+v, %v", c, err)
	}
	o.Write([]byte("\n"))
	if c, _ = o.Grep(ctx, nil, false, errs, Budget{}); c.Text != "partial ERROR\n" {
		t.Fatalf("the last line once written: %+v", c)
	}
	if c, _ = o.Tail(ctx, 3, false, nil, Budget{}); c.Text != "line 999\nline 1000 ERROR\npartial ERROR\n" || c.Lines != 3 {
		t.Fatalf("tail 3: %+v", c)
	}
	if c, _ = o.Tail(ctx, 2, false, errs, Budget{}); c.Text != "line 1000 ERROR\npartial ERROR\n" {
		t.Fatalf("tail 2 of grep: %+v", c)
	}
	if c, _ = o.Tail(ctx, 100, false, nil, Budget{Chars: 30}); c.Text != "line 1000 ERROR\npartial ERROR\n" || c.Lines != 2 {
		t.Fatalf("tail 100 within 30 characters: %+v", c)
	}
	if c, _ = o.Grep(ctx, offset(0), false, mustCompile(t, `^line 99\d$`), Budget{}); c.Lines != 10 {
		t.Fatalf("grep from 0: %+v", c)
	}
}

func offset(n int64) *int64 { return &n }

func mustCompile(t testing.TB, expr string) *Pattern {
	t.Helper()
	p, err := Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
