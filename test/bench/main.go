// Command bench runs reaper's benchmarks beside their baselines and prints one table: each figure, its
// baseline measured in the same run, their ratio, and its goal where one is set.
//
//	go run ./test/bench                                  # as root, from the repository
//	go run ./test/bench -rounds 1 -only 'RoundTrip|Output'
//	REAPER_BASELINE=/tmp/reaper-base go run ./test/bench # also against an earlier reaper binary
//
// BENCHMARKS.md says how long a run takes and how to build the earlier binary.
//
// Every benchmark alternates reaper and its baseline within a run (see test/e2e/bench_linux_test.go
// and reaper/bench_linux_test.go). This command runs each benchmark once per round, round after
// round, so that a burst of load from elsewhere hits one round of everything rather than every run of
// one benchmark; the table holds the medians over the rounds and the range of the ratio. The load
// average is sampled throughout and printed above the table, to say how quiet the machine was. The
// go test output goes to standard error as it comes; the table, in Markdown, to standard output.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() { os.Exit(run()) }

// run runs the command and returns its exit status: 0, 1 if a benchmark failed, 2 on bad usage or
// a failed build.
func run() int {
	rounds := flag.Int("rounds", 5, "run every benchmark this many times (the expensive ones at most 3)")
	only := flag.String("only", "", "run only the benchmarks whose names match this regular expression")
	from := flag.String("from", "", "print the table of an earlier run from its standard error, saved in this file, instead of running")
	flag.Parse()
	filter, err := regexp.Compile(*only)
	if err != nil {
		return fatal(err)
	}
	var selected []group
	for _, g := range groups {
		if filter.MatchString(g.bench) {
			selected = append(selected, g)
		}
	}
	if len(selected) == 0 {
		return fatal(fmt.Errorf("no benchmark matches %q", *only))
	}
	if *from != "" {
		return replay(*from, selected)
	}
	root, err := moduleRoot()
	if err != nil {
		return fatal(err)
	}
	tmp, err := os.MkdirTemp("", "reaper-bench-")
	if err != nil {
		return fatal(err)
	}
	defer os.RemoveAll(tmp)
	bins, err := buildTests(root, tmp, selected)
	if err != nil {
		return fatal(err)
	}
	load := sampleLoad()
	cpu := measureCPU()
	res := newResults()
	start := time.Now()
	for round := 1; round <= *rounds; round++ {
		for _, g := range selected {
			if g.maxRounds > 0 && round > g.maxRounds {
				continue
			}
			fmt.Fprintf(os.Stderr, "--- round %d of %d: %s %s -benchtime %s\n", round, *rounds, g.pkg, g.bench, g.benchtime)
			res.run(bins[g.pkg], filepath.Join(root, g.pkg), g)
		}
	}
	info := runInfo{machine: machine(), rounds: *rounds, took: time.Since(start).Round(time.Second).String(), loads: load(), cpu: cpu()}
	// For -from: what the table says besides the results.
	fmt.Fprintf(os.Stderr, "--- machine: %s\n--- took %s\n--- cpu: %s\n--- load average samples:", info.machine, info.took, info.cpu)
	for _, l := range info.loads {
		fmt.Fprintf(os.Stderr, " %.2f", l)
	}
	fmt.Fprintln(os.Stderr)
	printTable(os.Stdout, res, info, selected)
	if len(res.failed) > 0 {
		return 1
	}
	return 0
}

func fatal(err error) int {
	fmt.Fprintln(os.Stderr, "bench:", err)
	return 2
}

// replay prints the table of an earlier run from the standard error it wrote.
func replay(file string, selected []group) int {
	f, err := os.Open(file)
	if err != nil {
		return fatal(err)
	}
	defer f.Close()
	res := newResults()
	info := res.parseLog(f)
	if info.machine == "" {
		info.machine = machine() + " (this machine; the log does not say)"
	}
	printTable(os.Stdout, res, info, selected)
	return 0
}

// moduleRoot returns the directory of the reaper module that holds the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	b, err := os.ReadFile(gomod)
	if err != nil || !strings.Contains(string(b), "module github.com/cgreaper/reaper\n") {
		return "", fmt.Errorf("run this in the reaper repository (go.mod here is %q)", gomod)
	}
	return filepath.Dir(gomod), nil
}

// buildTests compiles the test binary of every package the groups need, so that the rounds do not
// pay for linking it each time.
func buildTests(root, dir string, gs []group) (map[string]string, error) {
	bins := map[string]string{}
	for _, g := range gs {
		if bins[g.pkg] != "" {
			continue
		}
		bin := filepath.Join(dir, strings.ReplaceAll(strings.Trim(g.pkg, "./"), "/", "-")+".test")
		cmd := exec.Command("go", "test", "-c", "-o", bin, g.pkg)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go test -c %s: %w", g.pkg, err)
		}
		bins[g.pkg] = bin
	}
	return bins, nil
}

// results gathers the metrics of every run, by benchmark, and what skipped or failed.
type results struct {
	runs    map[string][]map[string]float64 // benchmark -> one map of metric -> value per run
	skipped map[string]string               // benchmark -> reason
	failed  []string
}

func newResults() *results {
	return &results{runs: map[string][]map[string]float64{}, skipped: map[string]string{}}
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// run runs one group's benchmark once, echoing its output to standard error, and records it.
func (r *results) run(bin, dir string, g group) {
	cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", "^"+g.bench+"$", "-test.benchtime", g.benchtime, "-test.count", "1")
	cmd.Dir = dir
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		r.failed = append(r.failed, fmt.Sprintf("%s: %v", g.bench, err))
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.parse(pr)
	}()
	err := cmd.Wait()
	pw.Close()
	wg.Wait()
	if err != nil {
		r.failed = append(r.failed, fmt.Sprintf("%s: %v", g.bench, err))
	}
}

// parse reads go test's benchmark output, echoing it to standard error: result lines, and the
// reasons of skips and failures.
func (r *results) parse(out io.Reader) {
	r.scan(out, func(line string) { fmt.Fprintln(os.Stderr, line) })
}

// runInfo is what the table says about the run besides the results.
type runInfo struct {
	machine, took string
	rounds        int
	loads         []float64 // 1-minute load average samples
	cpu           string    // the CPU used by this run and by everything else, as measureCPU says
}

// parseLog reads what an earlier run wrote to standard error, and returns what it says about the run.
func (r *results) parseLog(log io.Reader) runInfo {
	info := runInfo{took: "(unknown time)"}
	r.scan(log, func(line string) {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "--- machine: "):
			info.machine = strings.TrimPrefix(line, "--- machine: ")
		case strings.HasPrefix(line, "--- cpu: "):
			info.cpu = strings.TrimPrefix(line, "--- cpu: ")
		case len(f) >= 5 && f[0] == "---" && f[1] == "round" && f[3] == "of":
			info.rounds, _ = strconv.Atoi(f[4][:len(f[4])-1])
		case len(f) == 3 && f[0] == "---" && f[1] == "took":
			info.took = f[2]
		case strings.HasPrefix(line, "--- load average samples:"):
			for _, v := range f[4:] {
				if l, err := strconv.ParseFloat(v, 64); err == nil {
					info.loads = append(info.loads, l)
				}
			}
		}
	})
	return info
}

// scan reads benchmark output, passing every line to echo.
func (r *results) scan(out io.Reader, echo func(string)) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var status, name string // the latest "--- SKIP" or "--- FAIL" and its benchmark
	for sc.Scan() {
		line := sc.Text()
		echo(line)
		f := strings.Fields(line)
		switch {
		case len(f) >= 4 && strings.HasPrefix(f[0], "Benchmark"):
			m := map[string]float64{}
			for i := 2; i+1 < len(f); i += 2 {
				if v, err := strconv.ParseFloat(f[i], 64); err == nil {
					m[f[i+1]] = v
				}
			}
			bench := procsSuffix.ReplaceAllString(f[0], "")
			r.runs[bench] = append(r.runs[bench], m)
			status = ""
		case len(f) >= 3 && f[0] == "---" && (f[1] == "SKIP:" || f[1] == "FAIL:"):
			status, name = f[1], procsSuffix.ReplaceAllString(f[2], "")
			if status == "FAIL:" {
				r.failed = append(r.failed, name)
			}
		case status != "" && strings.HasPrefix(line, "    "):
			reason := strings.TrimSpace(line)
			if _, after, ok := strings.Cut(reason, ": "); ok && strings.Contains(reason, ".go:") {
				reason = after // drop the file:line
			}
			if status == "SKIP:" {
				r.skipped[name] = reason
			} else {
				r.failed[len(r.failed)-1] += ": " + reason
			}
		}
	}
	io.Copy(io.Discard, out)
}

// sampleLoad samples the 1-minute load average every 5 s until the returned function is called,
// which returns the samples.
func sampleLoad() func() []float64 {
	var mu sync.Mutex
	var samples []float64
	stop := make(chan struct{})
	done := make(chan struct{})
	read := func() {
		b, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			return
		}
		if v, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64); err == nil {
			mu.Lock()
			samples = append(samples, v)
			mu.Unlock()
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			read()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() []float64 {
		close(stop)
		<-done
		read()
		mu.Lock()
		defer mu.Unlock()
		return append([]float64(nil), samples...)
	}
}

// measureCPU starts measuring the CPU time the machine spends busy (/proc/stat) and the part of it
// this process's children used (their rusage: every benchmark run, with what it started and
// reaped). The returned function says how much of the machine's CPUs each used since, in percent:
// the load average counts the benchmarks' own crowds dying, so it alone cannot say how much else
// ran.
func measureCPU() func() string {
	busy := func() time.Duration {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0
		}
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) // cpu user nice system idle iowait irq softirq steal
		var ticks int64
		for i, v := range f[1:] {
			if i == 3 || i == 4 || i > 7 {
				continue // idle, iowait, guest (already in user)
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
		return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100
	}
	ours := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b0, o0, start := busy(), ours(), time.Now()
	return func() string {
		capacity := float64(time.Since(start)) * float64(runtime.NumCPU())
		b, o := float64(busy()-b0), float64(ours()-o0)
		return fmt.Sprintf("this run used %.0f%% of the CPUs, everything else %.0f%%", 100*o/capacity, 100*max(b-o, 0)/capacity)
	}
}

// machine describes this machine: kernel, Go, CPUs and memory.
func machine() string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	gover, _ := exec.Command("go", "env", "GOVERSION").Output()
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 2 {
			kib, _ := strconv.Atoi(f[1])
			mem = fmt.Sprintf(", %.0f GiB", float64(kib)/(1<<20))
		}
	}
	return fmt.Sprintf("Linux %s, %s, %d CPUs%s", strings.TrimSpace(string(kernel)), strings.TrimSpace(string(gover)), runtime.NumCPU(), mem)
}

// median returns the median of vs, which it sorts.
func median(vs []float64) float64 {
	sort.Float64s(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}
