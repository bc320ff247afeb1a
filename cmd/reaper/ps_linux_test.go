package main

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cgreaper/reaper/internal/inspect"
	"github.com/cgreaper/reaper/internal/instance"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"sleep 1000":                 "sleep 1000",
		"héllo wörld ✓":              "héllo wörld ✓",
		"\x1b]0;pwned\x07ls":         `\x1b]0;pwned\x07ls`,
		"a\x1b[2Jb":                  `a\x1b[2Jb`,
		"x\u009b31my":                `x\u009b31my`,
		"evil\u202egnp.exe":          `evil\u202egnp.exe`,
		"bad\xffutf8":                `bad\xffutf8`,
		"tab\there\nnewline\rcr\x7f": `tab\x09here\x0anewline\x0dcr\x7f`,
		`back\slash`:                 `back\slash`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
	if got := oneLine("a\x1b[31m"+strings.Repeat("é", 100), 20); len(got) > 20 || !utf8.ValidString(got) || strings.ContainsRune(got, 0x1b) {
		t.Errorf("oneLine cut to %d bytes: %q", len(got), got)
	}
}

// FuzzPrintable: whatever a process, a task or a record holds, what reaper ps prints of it is valid
// UTF-8 without a character a terminal would act on.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J", "\u009b", "\u202e", "\xff\xfe", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := printable(s)
		if !utf8.ValidString(got) {
			t.Fatalf("printable(%q) = %q: not UTF-8", s, got)
		}
		for _, r := range got {
			if !unicode.IsPrint(r) {
				t.Fatalf("printable(%q) = %q holds %U", s, got, r)
			}
		}
		if line := oneLine(s, 40); len(line) > 40 || !utf8.ValidString(line) {
			t.Fatalf("oneLine(%q, 40) = %q", s, line)
		}
	})
}

// TestPrintPsAge: a live instance is up for its age; a dead one started that long ago.
func TestPrintPsAge(t *testing.T) {
	started := time.Now().Add(-2 * time.Second)
	for alive, want := range map[bool]string{true: "running  up 2s\n", false: "dead: its leftovers are for reaper sweep  started 2s ago\n"} {
		var b strings.Builder
		printPs(&b, inspect.Inspection{Instances: []inspect.InstanceView{{Record: instance.Record{Name: "r1-2", Pid: 1, Started: started}, Alive: alive}}})
		if first, _, _ := strings.Cut(b.String(), "\n"); !strings.HasSuffix(first+"\n", want) {
			t.Errorf("alive %v: %q, want it to end %q", alive, first, want)
		}
	}
}

// TestUsageLine: what a session's slice counts is printed with its limits; a figure not counted is
// left out, not shown as 0; a session without a slice says why nothing is counted.
func TestUsageLine(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		sv   inspect.SessionView
		want string
	}{
		{inspect.SessionView{Usage: &inspect.UsageView{CPUSeconds: 1.25}}, "usage: cpu 1.25s"},
		{inspect.SessionView{Usage: &inspect.UsageView{CPUSeconds: 0.5, MemoryBytes: i64(3 << 20), MemoryPeakBytes: i64(64 << 20), MemoryMaxBytes: i64(64 << 20),
			OOMKills: i64(1), Pids: i64(5), PidsMax: i64(64), ForksRefused: i64(12), ThrottledPeriods: i64(30), ThrottledSeconds: f64(2.1), CPUMax: f64(0.2)}},
			"usage: cpu 500ms, memory 3.0 MiB, peak 64.0 MiB of 64.0 MiB, 1 oom kills, pids 5 of 64, 12 forks refused, throttled in 30 periods (2.1s) at 0.2 CPUs"},
		{inspect.SessionView{NotCounted: "process containment"}, "usage not counted: process containment"},
	} {
		if got := usageLine(tc.sv); got != tc.want {
			t.Errorf("usageLine = %q, want %q", got, tc.want)
		}
	}
}
