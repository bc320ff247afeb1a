package reaper

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestOutputEdgeCases(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{OutputLimit: 1 << 20})
	s := newTestSession(t, r, SessionOptions{})

	// One 10 MB line: no line limit, bounded result, head and tail kept.
	res := run(t, s, "printf start; head -c 10000000 /dev/zero | tr '\\0' a; printf end")
	if res.Total != 10000008 || res.Dropped != 10000008-(1<<20) {
		t.Errorf("10 MB line: total %d dropped %d", res.Total, res.Dropped)
	}
	if !strings.HasPrefix(res.Output, "startaaa") || !strings.HasSuffix(res.Output, "aaaend") || len(res.Output) > 1<<20+100 {
		t.Errorf("10 MB line came back as %d bytes starting %q", len(res.Output), res.Output[:min(20, len(res.Output))])
	}
	// Binary and invalid UTF-8 come back as valid text.
	res = run(t, s, "head -c 200000 /dev/urandom; printf '\\377\\376 tail'")
	if !utf8.ValidString(res.Output) || res.Total != 200007 || !strings.HasSuffix(res.Output, "\uFFFD tail") {
		t.Errorf("binary output: valid=%v total=%d end=%q", utf8.ValidString(res.Output), res.Total, res.Output[max(0, len(res.Output)-12):])
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
		info, c, err := s.Output(ti.ID, OutputOptions{})
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
	if _, c, _ := s.Output(ti.ID, OutputOptions{Offset: offset(6)}); c.Text != "line2\nline3\n" {
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
	// Ten 1 MiB buffers and ten 32 KiB read buffers; allow generous slack for the race detector
	// and the runtime.
	if grow := peak - base; grow > 150<<20 {
		t.Errorf("memory grew by %d MiB during the flood", grow>>20)
	}
	if _, c, _ := s.Output(ids[0], OutputOptions{}); len(c.Text) > 1<<20+64 {
		t.Errorf("a flood task returned %d bytes", len(c.Text))
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

// TestFinishedTaskReads: a finished task's output, up to the output limit, comes back in one read
// within a budget of the limit: its head, a line for the dropped middle, its tail. Under a smaller
// budget each read says how much is pending, and the reads that follow return the rest, each from
// where the previous ended, nothing lost or repeated.
func TestFinishedTaskReads(t *testing.T) {
	const limit = 1 << 20
	r := newTestReaper(t, ContainCgroup, Options{OutputLimit: limit})
	s := newTestSession(t, r, SessionOptions{})
	finished := func(command string) string {
		t.Helper()
		ti, err := s.Start(command, "")
		if err != nil {
			t.Fatal(err)
		}
		if ti, err = s.Wait(context.Background(), ti.ID, time.Minute); err != nil || !ti.Status.Terminal() {
			t.Fatalf("task %+v did not end: %v", ti, err)
		}
		return ti.ID
	}

	// 2 MB: one read returns the 1 MiB kept, and nothing is pending.
	id := finished("head -c 2000000 /dev/zero | tr '\\0' '~'")
	ti, c, err := s.Output(id, OutputOptions{Budget: Budget{Cost: jsonish, Max: limit}})
	if err != nil {
		t.Fatal(err)
	}
	if ti.Status != Completed || strings.Count(c.Text, "~") != limit || c.Skipped != 2000000-limit ||
		c.Offset != 0 || c.Next != 2000000 || c.Pending != 0 || !strings.Contains(c.Text, dropNotice(c.Skipped)) {
		t.Errorf("one read of a finished 2 MB task: %s, %d '~', offset %d, next %d, skipped %d, pending %d",
			ti.Status, strings.Count(c.Text, "~"), c.Offset, c.Next, c.Skipped, c.Pending)
	}

	// Numbered lines, read under a budget of 100,000: every read but the last says what is pending,
	// and together they are the head and the tail of the stream, each byte once.
	// Made here, not by running seq: the Reaper's wait loop, which the session's init keeps in wait4,
	// would take an exec.Cmd's exit status.
	var want []byte
	for i := 1; i <= 400000; i++ {
		want = strconv.AppendInt(want, int64(i), 10)
		want = append(want, '\n')
	}
	id = finished("seq 400000")
	var got strings.Builder
	var next, skipped int64
	reads := 0
	for {
		reads++
		_, c, err := s.Output(id, OutputOptions{Budget: Budget{Cost: jsonish, Max: 100000}})
		if err != nil {
			t.Fatal(err)
		}
		if c.Offset != next || c.Next <= c.Offset || c.Total != int64(len(want)) {
			t.Fatalf("read %d after %d: offset %d next %d total %d", reads, next, c.Offset, c.Next, c.Total)
		}
		text := c.Text
		if c.Skipped > 0 {
			notice := dropNotice(c.Skipped)
			if strings.HasPrefix(text, notice[1:]) {
				notice = notice[1:] // a read that starts in the dropped middle
			}
			before, after, ok := strings.Cut(text, notice)
			if !ok {
				t.Fatalf("read %d skipped %d bytes and has no line for them: %.80q", reads, c.Skipped, text)
			}
			text = before + after
			skipped += c.Skipped
		}
		got.WriteString(text)
		next = c.Next
		if c.Pending == 0 {
			break
		}
		if c.Pending != c.Total-c.Next-(int64(len(want))-limit-skipped) {
			t.Errorf("read %d: %d bytes pending, want %d", reads, c.Pending, c.Total-c.Next-(int64(len(want))-limit-skipped))
		}
	}
	if next != int64(len(want)) || skipped != int64(len(want))-limit || got.String() != string(want[:limit/2])+string(want[len(want)-limit/2:]) {
		t.Errorf("%d reads ended at %d of %d, skipped %d, and gave %d bytes that are not the head and tail kept",
			reads, next, len(want), skipped, got.Len())
	}
	if reads < 10 {
		t.Errorf("1 MiB under a budget of 100,000 took %d reads", reads)
	}
}
