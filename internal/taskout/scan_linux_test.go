package taskout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/safefs"
)

// slowPattern is a pattern within the cost limit that is slow on lines of a's: over a microsecond a
// byte (BenchmarkPatternCost), and it matches none of them.
const slowPattern = `(?s).{300}z`

// storeWith returns a store in a directory of the test's with the given options (Dir set here).
func storeWith(t testing.TB, o Options) *Store {
	t.Helper()
	dir, err := safefs.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	o.Dir = dir
	return NewStore(o)
}

// fill writes n lines of width bytes each (a's, then the line's number) into o.
func fill(o *Output, n, width int) {
	pad := bytes.Repeat([]byte("a"), width-8)
	var b []byte
	for i := range n {
		b = append(append(b[:0], pad...), fmt.Sprintf("%07d\n", i)...)
		o.Write(b)
	}
}

func TestCompileBounds(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{strings.Repeat("a", MaxPatternBytes+1), "the limit is 4096"},
		{"a(b", "RE2 syntax"},
		// The attack: 4 KB of nested optional repetitions, over a million instructions.
		{strings.Repeat("(a?){1000}", 409) + "z", "narrower pattern"},
		{`(a?){1000}`, "the limit is 1000"},
		{`\pL{300}`, "too costly"},
	} {
		if _, err := Compile(tc.expr); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%.40q): %v, want an error that says %q", tc.expr, err, tc.want)
		}
	}
	for _, expr := range []string{"error", `(?i)error|warn|fail`, `\b(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\b`,
		`^\s+at .*\(.*\.java:\d+\)$`, `[0-9a-f]{40}`, `.{0,200}panic.{0,200}`, slowPattern} {
		p, err := Compile(expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", expr, err)
			continue
		}
		if p.Cost() < 1 || p.Cost() > MaxPatternCost || p.String() != expr {
			t.Errorf("Compile(%q): cost %d, source %q", expr, p.Cost(), p.String())
		}
	}
}

// TestGrepLimits: a grep stopped by its time or its work limit returns what it found and where to go
// on, and the reads that follow, each from where the last stopped, find every line a grep without
// limits finds, once; a tail that cannot reach the end says so.
func TestGrepLimits(t *testing.T) {
	const width = 1000
	every := mustCompile(t, `[05]$`)
	for _, tc := range []struct {
		name    string
		lines   int
		opts    Options
		pattern *Pattern
		stop    string
	}{
		// The work of about 100 lines.
		{"work", 400, Options{ScanWork: 100 * (width + 1) * every.Cost()}, every, "work limit"},
		// A pattern slow enough that 50 ms covers a part only: a line of a's takes over a
		// millisecond. It matches no line: the alternation finds them.
		{"time", 100, Options{ScanTime: 50 * time.Millisecond}, mustCompile(t, slowPattern+`|[05]$`), "time limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, pattern := tc.lines, tc.pattern
			ref := NewStore(Options{}).New("ref")
			fill(ref, lines, width)
			want, err := ref.Grep(context.Background(), offset(0), false, every, Budget{})
			if err != nil || want.Lines != lines/5 || want.Stopped != "" {
				t.Fatalf("a grep within the default limits: %d lines, stopped %q, %v", want.Lines, want.Stopped, err)
			}
			st := storeWith(t, tc.opts)
			o := st.New("x.out")
			fill(o, lines, width)
			var got strings.Builder
			reads, stops := 0, 0
			for from := int64(0); ; reads++ {
				c, err := o.Grep(context.Background(), offset(from), false, pattern, Budget{})
				if err != nil {
					t.Fatal(err)
				}
				if c.Next <= from && c.Pending > 0 {
					t.Fatalf("read %d made no progress from %d: %+v", reads, from, c)
				}
				got.WriteString(c.Text)
				if c.Stopped != "" {
					stops++
					if !strings.Contains(c.Stopped, tc.stop) || c.Pending != int64(lines*width)-c.Next {
						t.Fatalf("read %d stopped: %q, %d pending after %d", reads, c.Stopped, c.Pending, c.Next)
					}
				}
				if c.Pending == 0 {
					break
				}
				from = c.Next
			}
			if got.String() != want.Text || stops == 0 {
				t.Errorf("%d reads (%d stopped at the %s) found %d bytes of lines, want %d", reads, stops, tc.stop, got.Len(), len(want.Text))
			}
			_, err = o.Tail(context.Background(), 3, false, pattern, Budget{})
			if err == nil || !strings.Contains(err.Error(), tc.stop) || !strings.Contains(err.Error(), "narrower pattern") {
				t.Errorf("a tail that cannot reach the end: %v", err)
			}
		})
	}
}

// TestGrepStops: a grep stops, with an error and its cursor where it was, when its call's context is
// done and when its store closes; and a slow grep holds up neither the writer, nor the output's end,
// nor the store's close.
func TestGrepStops(t *testing.T) {
	st := storeWith(t, Options{ScanTime: time.Hour})
	slow := mustCompile(t, slowPattern)
	o := st.New("x.out")
	fill(o, 20000, 1000) // 20 MB of lines that take over a millisecond each: half a minute and more

	grep := func(ctx context.Context, what string, during func()) {
		t.Helper()
		errc := make(chan error, 1)
		go func() {
			_, err := o.Grep(ctx, nil, true, slow, Budget{})
			errc <- err
		}()
		time.Sleep(100 * time.Millisecond) // the search under way
		during()
		select {
		case err := <-errc:
			if err == nil {
				t.Fatalf("a grep %s returned no error", what)
			}
			t.Logf("a grep %s: %v", what, err)
			if what == "whose store closed" && !errors.Is(err, ErrClosed) || what == "whose call was cancelled" && !errors.Is(err, context.Canceled) {
				t.Errorf("a grep %s: %v", what, err)
			}
		case <-time.After(patience):
			t.Fatalf("a grep %s did not return within %v", what, patience)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	grep(ctx, "whose call was cancelled", func() {
		// Meanwhile the output takes writes: nothing waits for the search.
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 1000 {
				o.Write(bytes.Repeat([]byte("b"), 1000))
			}
		}()
		select {
		case <-done:
		case <-time.After(patience):
			t.Errorf("1000 writes during a grep did not return within %v", patience)
		}
		cancel()
	})
	if c := read(t, o, nil, true, Budget{Chars: 10}); c.Offset != 0 {
		t.Errorf("a cancelled grep moved the cursor to %d", c.Offset)
	}
	grep(context.Background(), "whose store closed", func() {
		o.End()
		st.Close()
	})
}

// TestReadsAcrossTheEnd: reads and greps that run while the output outgrows its budget and ends (the
// end shortens the head to make room for the tail) each see a whole, well-formed piece of the stream:
// lines as written, and where a part was left out, the line that says so.
func TestReadsAcrossTheEnd(t *testing.T) {
	for round := range 20 {
		st := storeWith(t, Options{Budget: 64 << 10})
		o := st.New(fmt.Sprintf("r%d.out", round))
		stop := make(chan struct{})
		errs := make(chan error, 2)
		// A read never returns the file's own line for the part left out (its bytes are not the
		// stream's), and between the lines that stand for parts left out, the whole lines it returns
		// follow each other (a grep's once, over what it skipped).
		check := func(text string, jumps int) error {
			if strings.Contains(text, "left out here:") {
				return fmt.Errorf("a read returned the file's own notice: %.200q", text[strings.Index(text, "left out here:")-20:])
			}
			for _, seg := range strings.Split(text, "[... ") {
				prev := -1
				for _, l := range strings.Split(seg, "\n") {
					if len(l) != 99 {
						continue // a piece of a line, where a part left out begins or ends; a notice
					}
					n, err := strconv.Atoi(l[92:])
					if prev >= 0 && n > prev+1 && jumps > 0 {
						jumps--
						prev = n - 1
					}
					if strings.Trim(l[:92], "a") != "" || err != nil || prev >= 0 && n != prev+1 {
						return fmt.Errorf("a line read while the output ended: %q after line %d", l, prev)
					}
					prev = n
				}
			}
			return nil
		}
		for _, grep := range []bool{false, true} {
			go func() {
				p := mustCompile(t, `a`)
				for {
					select {
					case <-stop:
						errs <- nil
						return
					default:
					}
					var c Chunk
					var err error
					if grep {
						c, err = o.Grep(context.Background(), offset(0), true, p, Budget{})
					} else {
						c, err = o.Read(offset(0), true, Budget{})
					}
					if err == nil {
						err = check(c.Text, min(int(c.Skipped), 1))
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		fill(o, 1000, 100) // 100 KB into 64 KiB
		o.End()
		close(stop)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		wh, err := o.All(false, Budget{})
		if err != nil || check(wh.Text, 0) != nil || wh.Dropped == 0 {
			t.Fatalf("the ended output: %d dropped, %v, %v", wh.Dropped, err, check(wh.Text, 0))
		}
		if _, err := os.Stat(o.File().Path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTruncatedFile: a file shorter than it was written (a root task can truncate it) reads as what it
// holds: reads, greps and tails end, nothing hangs or fails.
func TestTruncatedFile(t *testing.T) {
	o := storeWith(t, Options{}).New("t.out")
	fill(o, 1000, 100)
	o.End()
	if err := os.Truncate(o.File().Path, 50000); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		var got []string
		p := mustCompile(t, `0$`)
		c, err := o.Grep(context.Background(), offset(0), false, p, Budget{})
		got = append(got, fmt.Sprintf("grep: %d lines, next %d, %v", c.Lines, c.Next, err))
		c, err = o.Tail(context.Background(), 5, false, nil, Budget{})
		got = append(got, fmt.Sprintf("tail: %d lines, %v", c.Lines, err))
		c, err = o.Read(offset(0), false, Budget{})
		got = append(got, fmt.Sprintf("read: %d bytes, %v", len(c.Text), err))
		done <- strings.Join(got, "; ")
	}()
	select {
	case got := <-done:
		t.Log(got)
		if strings.Contains(got, "<nil>") != true || !strings.Contains(got, "grep: 50 lines") {
			t.Errorf("reads of a truncated file: %s", got)
		}
	case <-time.After(patience):
		t.Fatalf("reads of a truncated file did not return within %v", patience)
	}
}

// String returns the pattern's source.
func (p *Pattern) String() string { return p.re.String() }

// Cost returns the pattern's cost: the work of searching one byte of text with it.
func (p *Pattern) Cost() int64 { return p.cost }
