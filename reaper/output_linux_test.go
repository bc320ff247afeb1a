package reaper

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cgreaper/reaper/internal/testutil"
)

func TestOutputEdgeCases(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	s := newTestSession(t, r, SessionOptions{})

	// One 10 MB line: no line limit, whole in the file, head and tail in the result.
	res, err := s.Run(context.Background(), "printf start; head -c 10000000 /dev/zero | tr '\\0' a; printf end", RunOptions{Timeout: time.Minute, Budget: Budget{Chars: 30000}})
	if err != nil {
		t.Fatal(err)
	}
	// The line that says what was left out counts within the 30,000 characters.
	front, rest, _ := strings.Cut(res.Output, "\n[... ")
	_, back, _ := strings.Cut(rest, " ...]\n")
	if res.Total != 10000008 || res.DroppedChars != res.Total-int64(len(front)+len(back)) || res.Lines != 0 {
		t.Errorf("10 MB line: total %d, %d characters dropped, %d lines", res.Total, res.DroppedChars, res.Lines)
	}
	if !strings.HasPrefix(res.Output, "startaaa") || !strings.HasSuffix(res.Output, "aaaend") || utf8.RuneCountInString(res.Output) > 30000 {
		t.Errorf("10 MB line came back as %d bytes starting %q", len(res.Output), res.Output[:min(20, len(res.Output))])
	}
	if fi, err := os.Stat(res.File.Path); err != nil || fi.Size() != 10000008 || res.OutputID == "" {
		t.Errorf("the output file %s: %v, %v (id %q)", res.File.Path, fi, err, res.OutputID)
	}
	// Binary and invalid UTF-8 come back as valid text.
	res = run(t, s, "head -c 200000 /dev/urandom; printf '\\377\\376 tail'")
	if !utf8.ValidString(res.Output) || res.Total != 200007 || !strings.HasSuffix(res.Output, "\uFFFD tail") {
		t.Errorf("binary output: valid=%v total=%d end=%q", utf8.ValidString(res.Output), res.Total, res.Output[max(0, len(res.Output)-12):])
	}
	// A command that prints nothing has no file.
	if res = run(t, s, "true"); res.File.Path != "" || res.OutputID != "" {
		t.Errorf("true: %+v", res.File)
	}
}

func TestIncrementalReads(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	s := newTestSession(t, r, SessionOptions{})
	ti, err := s.Start("for i in 1 2 3; do echo line$i; sleep 0.2; done", "counter")
	if err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the task did not end within 30 s; read so far %q", seen.String())
		}
		info, c, err := s.Output(context.Background(), ti.ID, OutputOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(seen.String(), c.Text) && c.Text != "" && c.Offset < int64(seen.Len()) {
			t.Fatalf("read %+v repeats output already seen (%q)", c, seen.String())
		}
		seen.WriteString(c.Text)
		if info.Status.Terminal() {
			break
		}
		s.Wait(context.Background(), ti.ID, 50*time.Millisecond)
	}
	if seen.String() != "line1\nline2\nline3\n" {
		t.Errorf("incremental reads gave %q", seen.String())
	}
	if _, c, _ := s.Output(context.Background(), ti.ID, OutputOptions{Offset: offset(6)}); c.Text != "line2\nline3\n" {
		t.Errorf("read from offset 6: %q", c.Text)
	}
}

// TestFloodStaysBounded runs ten tasks that each write 1 GiB as fast as they can and checks that this
// process's memory stays bounded by the output limits, not by what was written.
func TestFloodStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: writes 10 GiB through pipes")
	}
	r := newTestReaper(t, ContainCgroup, Options{MaxTasks: 10})
	s := newTestSession(t, r, SessionOptions{})
	base := rss(t)
	var ids []string
	for range 10 {
		ti, err := s.Start("head -c 1073741824 /dev/zero", "flood")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ti.ID)
	}
	peak := base
	deadline := time.Now().Add(10 * time.Minute)
	for _, id := range ids {
		for {
			ti, _ := s.Wait(context.Background(), id, 100*time.Millisecond)
			peak = max(peak, rss(t))
			if ti.Status.Terminal() {
				if ti.Status != Completed || ti.OutputBytes != 1<<30 {
					t.Errorf("flood task %+v", ti)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("flood did not finish in 10 minutes")
			}
		}
	}
	t.Logf("RSS %d MiB before, peak %d MiB during 10 x 1 GiB of output", base>>20, peak>>20)
	// Ten 1 MiB tails (the files took the session's budget) and ten 32 KiB read buffers; allow
	// generous slack for the race detector and the runtime.
	if grow := peak - base; grow > 150<<20 {
		t.Errorf("memory grew by %d MiB during the flood", grow>>20)
	}
	if _, c, _ := s.Output(context.Background(), ids[0], OutputOptions{Budget: Budget{Chars: 30000}}); len(c.Text) > 30000+100 {
		t.Errorf("a flood task returned %d bytes", len(c.Text))
	}
	entries, err := os.ReadDir(s.dir.Path())
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".out") {
			used += fi.Size()
		}
	}
	if used == 0 || used > r.lim.OutputBudget {
		t.Errorf("the output files take %d bytes, want some and at most the budget of %d", used, r.lim.OutputBudget)
	}
}

// rss returns this process's resident set size in bytes.
func rss(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestFinishedTaskReads: a finished task's output comes back whole from its file, in reads within a
// budget, each from where the previous ended, nothing lost or repeated; a foreground command's file
// stays readable by its id once the command is cleared.
func TestFinishedTaskReads(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	s := newTestSession(t, r, SessionOptions{})
	// Made here, not by running seq: the Reaper's wait loop, which the session's init keeps in wait4,
	// would take an exec.Cmd's exit status.
	var want []byte
	for i := 1; i <= 400000; i++ {
		want = strconv.AppendInt(want, int64(i), 10)
		want = append(want, '\n')
	}
	ti, err := s.Start("seq 400000", "")
	if err != nil {
		t.Fatal(err)
	}
	if ti, err = s.Wait(context.Background(), ti.ID, time.Minute); err != nil || !ti.Status.Terminal() {
		t.Fatalf("task %+v did not end: %v", ti, err)
	}
	var got strings.Builder
	var next int64
	reads := 0
	for {
		reads++
		_, c, err := s.Output(context.Background(), ti.ID, OutputOptions{Budget: Budget{Chars: 100000, Cost: jsonish, Max: 1 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		if c.Offset != next || c.Next <= c.Offset || c.Total != int64(len(want)) || c.Skipped != 0 {
			t.Fatalf("read %d after %d: offset %d next %d total %d skipped %d", reads, next, c.Offset, c.Next, c.Total, c.Skipped)
		}
		got.WriteString(c.Text)
		next = c.Next
		if c.Pending == 0 {
			break
		}
		if c.Pending != c.Total-c.Next {
			t.Errorf("read %d: %d bytes pending, want %d", reads, c.Pending, c.Total-c.Next)
		}
	}
	if got.String() != string(want) || reads != (len(want)+99999)/100000 {
		t.Errorf("%d reads gave %d bytes of the %d written", reads, got.Len(), len(want))
	}
	// A foreground command: its file by its id, once the command is gone from the session's tasks.
	res := run(t, s, "seq 1000")
	if res.OutputID == "" {
		t.Fatalf("no output id: %+v", res)
	}
	s.prune()
	// A read without an offset starts at the file's beginning: the result was only head and tail.
	var seq strings.Builder
	for i := 1; i <= 1000; i++ {
		seq.WriteString(strconv.Itoa(i) + "\n")
	}
	if _, c, err := s.Output(context.Background(), res.OutputID, OutputOptions{}); err != nil || c.Text != seq.String() {
		t.Errorf("a read of a finished foreground command's file: %d bytes, %.20q (%v)", len(c.Text), c.Text, err)
	}
	info, c, err := s.Output(context.Background(), res.OutputID, OutputOptions{Tail: 2})
	if err != nil || c.Text != "999\n1000\n" || info.Status != Completed || info.Background {
		t.Errorf("tail 2 of a finished foreground command: %+v %+v %v", info, c, err)
	}
}

// TestLeftoverOutputReadOn: what a finished foreground command left behind writes on is still read
// (into the output nobody will read, at the slowed pump's pace), so the writer is never blocked for
// good on a full pipe; the session's Close stops it.
func TestLeftoverOutputReadOn(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	s := newTestSession(t, r, SessionOptions{})
	res := run(t, s, "(while :; do echo leftover; sleep 0.01; done) & echo started")
	s.mu.Lock()
	left := s.tasks[res.OutputID]
	s.mu.Unlock()
	if left == nil {
		t.Fatalf("no task %s in the session", res.OutputID)
	}
	before := left.out.Size()
	testutil.Eventually(t, "the leftover's output being read on", func() bool { return left.out.Size() > before+100 })
}
