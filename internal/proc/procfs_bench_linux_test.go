package proc

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// BenchmarkProcfs reads /proc the package's way and prometheus/procfs's, side by side in one run, for
// each read the package still makes by hand: the walk of every process (a teardown's, the sweep's),
// one stat, a process's description, its command line (a usual one, and 1 MiB of arguments) and its
// environment. (Cgroup and Switches read through procfs.) It starts REAPER_BENCH_PROCS sleeping processes (1000 unless set) so that the
// walk reads a host's worth. The package doc gives the figures and what was decided by them.
func BenchmarkProcfs(b *testing.B) {
	n := 1000
	if s := os.Getenv("REAPER_BENCH_PROCS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	crowd := start(b, []string{"PATH=/usr/bin:/bin"}, "/bin/sh", "-c", `i=0; while [ $i -lt `+strconv.Itoa(n)+` ]; do sleep 1000 & i=$((i+1)); done; wait`)
	filler := strings.Repeat("x", 1<<10)
	var env []string
	for i := range 64 { // 64 KiB of environment before the marker, as a task's may have
		env = append(env, "FILL"+strconv.Itoa(i)+"="+filler)
	}
	env = append(env, "REAPER_SESSION=bench/s-1")
	args := []string{"/bin/sh", "-c", "sleep 1000; :", "sh"}
	for range 8 {
		args = append(args, strings.Repeat("a", 128<<10-1)) // 1 MiB of arguments
	}
	marked := start(b, env, "/bin/sleep", "1000")
	long := start(b, nil, args...)
	w := NewWalker()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ds, _ := w.Descendants(crowd.Process.Pid)
		if len(ds) >= n && strings.HasPrefix(CommandLine(long.Process.Pid), "/bin/sh -c") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d processes started", len(ds), n)
		}
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		b.Fatal(err)
	}
	pid, bigPid := marked.Process.Pid, long.Process.Pid

	for _, bc := range []struct {
		name          string
		hand, library func(b *testing.B)
	}{
		{"walk", func(b *testing.B) {
			procs, err := w.Snapshot(nil)
			if err != nil || len(procs) < n {
				b.Fatalf("walk: %d processes, %v", len(procs), err)
			}
		}, func(b *testing.B) {
			procs, err := fs.AllProcs()
			if err != nil || len(procs) < n {
				b.Fatalf("walk: %d processes, %v", len(procs), err)
			}
			for _, p := range procs {
				p.Stat() // the pid's ppid and start time, as the walk needs them
			}
		}},
		{"stat", func(b *testing.B) {
			if _, ok := w.Stat(pid); !ok {
				b.Fatal("stat")
			}
		}, func(b *testing.B) {
			p, err := fs.Proc(pid)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Stat(); err != nil {
				b.Fatal(err)
			}
		}},
		{"describe", func(b *testing.B) {
			if Describe(pid).Comm != "sleep" {
				b.Fatal("describe")
			}
		}, func(b *testing.B) {
			p, err := fs.Proc(pid)
			if err != nil {
				b.Fatal(err)
			}
			st, err := p.Stat()
			if err != nil {
				b.Fatal(err)
			}
			start, err := st.StartTime()
			if err != nil || st.Comm != "sleep" {
				b.Fatal(err)
			}
			_ = Proc{Pid: pid, Comm: st.Comm, State: st.State, Age: time.Since(time.Unix(0, int64(start*1e9)))}
		}},
		{"cmdline", func(b *testing.B) { CommandLine(pid) }, func(b *testing.B) { procfsCmdline(b, fs, pid) }},
		{"cmdline-1MiB", func(b *testing.B) { CommandLine(bigPid) }, func(b *testing.B) { procfsCmdline(b, fs, bigPid) }},
		{"environ", func(b *testing.B) {
			if !w.Marked(pid, "REAPER_SESSION=bench/s-1") {
				b.Fatal("marker not found")
			}
		}, func(b *testing.B) {
			p, _ := fs.Proc(pid)
			env, err := p.Environ()
			if err != nil || !slices.Contains(env, "REAPER_SESSION=bench/s-1") {
				b.Fatal("marker not found", err)
			}
		}},
	} {
		b.Run(bc.name+"/hand", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.hand(b)
			}
		})
		b.Run(bc.name+"/procfs", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.library(b)
			}
		})
	}
}

// procfsCmdline is CommandLine through procfs: every argument read, then joined and cut.
func procfsCmdline(b *testing.B, fs procfs.FS, pid int) {
	p, _ := fs.Proc(pid)
	args, err := p.CmdLine()
	if err != nil || len(args) == 0 {
		b.Fatal("cmdline", err)
	}
	s := strings.Join(args, " ")
	if len(s) > maxCmdline {
		s = s[:maxCmdline-3] + "..."
	}
	sink = s
}

// sink keeps what a benchmark computed alive, so that the compiler does not drop the work.
var sink string
