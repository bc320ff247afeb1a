// Command density measures what each session costs in memory on a unified cgroup2 host: it starts
// one `reaper serve --http` in cgroup containment with per-session limits, opens sessions over HTTP
// until it holds each count asked for, every session running one live background task (`sleep`),
// and at each count reads what the sessions hold. It prints two Markdown tables: the figures at each
// count, and what each session added between counts. Counts and bytes only, no times: it is meant
// for the VM lane's guest a, whose CPU is emulated (test/vm/density runs it there).
//
//	density -reaper /path/to/reaper                          # as root; 1, 10, 50 and 100 sessions
//	density -reaper ./reaper -sessions 1,5 -- --memory-max 32M
//
// What it reads, at each count, once the sessions' tasks run:
//   - reaper's guard and server: RSS, PSS and private memory (/proc/PID/smaps_rollup), and the
//     server's Go heap in use (go_memstats_heap_inuse_bytes on /metrics);
//   - the sessions' inits (the leaf "inits" of reaper's instance cgroup) and their tasks' processes
//     (the slices), the same figures summed;
//   - the kernel's view: memory.current of the slices, of the inits' leaf and of reaper's instance
//     cgroup (whose memory.stat percpu holds the slices' own per-CPU structures), and the machine's
//     /proc/meminfo: slab, per-CPU, kernel stacks and page tables, and MemTotal less MemAvailable
//     (less this program's own private memory, which grows with its clients), each as its change
//     from before reaper started.
//
// At the end it closes every session (DELETE), stops reaper, and says how many cgroups the kernel
// still held dying (cgroup.stat nr_dying_descendants of the root it made), then removes that root.
// The reading of cgroupfs and /proc here is a measurement's, not reaper's: only package cgroup
// touches cgroupfs for the program.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "density:", err)
		os.Exit(1)
	}
}

// defaultLimits are the per-session limits reaper gets unless the command line gives its own flags.
var defaultLimits = []string{"--memory-max", "64M", "--pids-max", "64", "--cpu-max", "0.5"}

func run() error {
	bin := flag.String("reaper", "", "the reaper binary to measure (required)")
	counts := flag.String("sessions", "1,10,50,100", "the session counts to measure at, ascending")
	parallel := flag.Int("parallel", 4, "sessions opened at once")
	flag.Parse()
	if *bin == "" {
		return errors.New("-reaper is required")
	}
	ns, err := parseCounts(*counts)
	if err != nil {
		return err
	}
	limits := flag.Args()
	if len(limits) == 0 {
		limits = defaultLimits
	}
	mount, err := cgroup2Mount()
	if err != nil {
		return err
	}
	root := filepath.Join(mount, fmt.Sprintf("reaper-density-%d", os.Getpid()))
	state, err := os.MkdirTemp("", "reaper-density-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)

	before, err := readMeminfo()
	if err != nil {
		return err
	}
	// This program's own memory grows with its clients: it is taken out of the machine's figure.
	self, err := smaps(os.Getpid())
	if err != nil {
		return err
	}
	before.available += self.private
	srv, err := startReaper(*bin, root, state, ns[len(ns)-1], limits)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Fprintf(os.Stderr, "density: reaper %s, guard %d, server %d, cgroup root %s, limits %s\n",
		srv.url, srv.guard, srv.server, root, strings.Join(limits, " "))

	var sessions []*mcp.ClientSession
	defer func() {
		for _, cs := range sessions {
			cs.Close()
		}
	}()
	var rows []row
	first, err := measure(srv, root, before, 0)
	if err != nil {
		return err
	}
	rows = append(rows, first)
	for _, n := range ns {
		more, err := openSessions(srv, n-len(sessions), *parallel)
		sessions = append(sessions, more...)
		if err != nil {
			return err
		}
		r, err := measure(srv, root, before, n)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "density: %d sessions: %d processes in %d cgroups\n", n, r.processes, r.cgroups)
		rows = append(rows, r)
	}
	printTables(os.Stdout, rows, limits)

	for _, cs := range sessions {
		cs.Close() // DELETE: the session ends, and everything it ran
	}
	sessions = nil
	srv.stop()
	time.Sleep(2 * time.Second)
	live, dying := descendants(root)
	after, _ := readMeminfo()
	self, _ = smaps(os.Getpid())
	after.available += self.private
	d := after.sub(before)
	fmt.Printf("\nAfter every session ended and reaper stopped: %d cgroups left under the root, %d dying; from before reaper started, Slab %s, Percpu %s, KernelStack + PageTables %s, MemTotal − MemAvailable %s.\n",
		live, dying, signedMiB(d.slab), signedMiB(d.percpu), signedMiB(d.stacks+d.pageTables), signedMiB(-d.available))
	removeTree(root)
	return nil
}

// parseCounts parses "1,10,50,100" into ascending positive counts.
func parseCounts(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || len(ns) > 0 && n <= ns[len(ns)-1] {
			return nil, fmt.Errorf("-sessions %q: want ascending positive counts", s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// cgroup2Mount returns where cgroup2 is mounted: /sys/fs/cgroup on a unified host.
func cgroup2Mount() (string, error) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "cgroup2" {
			return f[1], nil
		}
	}
	return "", errors.New("no cgroup2 mount")
}

// server is the reaper under measurement.
type server struct {
	cmd           *exec.Cmd
	url, admin    string
	token         string
	guard, server int
	stopOnce      sync.Once
}

// startReaper starts reaper serve over HTTP with its admin endpoint, and waits for its start-up line.
func startReaper(bin, root, state string, sessions int, limits []string) (*server, error) {
	s := &server{token: fmt.Sprintf("density-%d-%d", os.Getpid(), time.Now().UnixNano())}
	args := append([]string{"serve", "--http", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-format", "json",
		"--containment", "cgroup", "--cgroup-root", root, "--state-dir", state,
		"--idle-timeout", "24h", "--max-sessions", strconv.Itoa(sessions + 8)}, limits...)
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), "REAPER_TOKEN="+s.token)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		var l map[string]any
		if json.Unmarshal(lines.Bytes(), &l) != nil {
			fmt.Fprintln(os.Stderr, lines.Text())
			continue
		}
		if l["level"] == "WARN" || l["level"] == "ERROR" {
			fmt.Fprintln(os.Stderr, lines.Text())
		}
		if l["msg"] == "reaper serving MCP over Streamable HTTP" {
			s.url, _ = l["url"].(string)
			s.admin, _ = l["admin"].(string)
			break
		}
	}
	if s.url == "" || s.admin == "" {
		s.stop()
		return nil, fmt.Errorf("reaper logged no endpoints before it ended: %v", s.cmd.Wait())
	}
	go io.Copy(io.Discard, stderr) // its later lines: reaper must never block on a full pipe
	s.guard = s.cmd.Process.Pid
	if s.server = childOf(s.guard); s.server == 0 {
		s.stop()
		return nil, fmt.Errorf("reaper's guard %d has no server", s.guard)
	}
	return s, nil
}

// stop ends reaper with SIGTERM (its sessions die with it) and waits for it.
func (s *server) stop() {
	s.stopOnce.Do(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			s.cmd.Process.Kill()
			<-done
		}
	})
}

// childOf returns the first child of pid (the guard's one child is the server).
func childOf(pid int) int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			n, _ := strconv.Atoi(fs[0])
			return n
		}
	}
	return 0
}

// bearer adds the token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// openSessions opens n sessions, parallel at a time, each running one background sleep.
func openSessions(s *server, n, parallel int) ([]*mcp.ClientSession, error) {
	var (
		mu   sync.Mutex
		out  []*mcp.ClientSession
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, max(1, parallel))
	hc := &http.Client{Transport: bearer{token: s.token, base: http.DefaultTransport}}
	for range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cs, err := openSession(s.url, hc)
			mu.Lock()
			defer mu.Unlock()
			if cs != nil {
				out = append(out, cs)
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// openSession connects a session and starts its background task.
func openSession(url string, hc *http.Client) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "reaper-density", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash",
		Arguments: map[string]any{"command": "sleep 100000", "run_in_background": true}})
	if err == nil && res.IsError {
		err = fmt.Errorf("%v", res.Content)
	}
	if err != nil {
		return cs, fmt.Errorf("background sleep: %w", err)
	}
	return cs, nil
}

// mem is what a set of processes holds (smaps_rollup), summed.
type mem struct{ rss, pss, private int64 }

func (m mem) add(o mem) mem { return mem{m.rss + o.rss, m.pss + o.pss, m.private + o.private} }

// row is what one count of sessions holds.
type row struct {
	sessions, cgroups, processes int
	guard, server                mem
	heap                         int64 // the server's Go heap in use
	inits, tasks                 mem
	initsN, tasksN               int
	slices                       int64 // memory.current of the slices, summed
	initsLeaf, instance          int64 // memory.current of the inits' leaf and of the instance cgroup
	percpu                       int64 // memory.stat percpu of the instance cgroup
	kernel                       meminfo
}

// measure reads what n sessions hold; before is /proc/meminfo before reaper started.
func measure(s *server, root string, before meminfo, n int) (row, error) {
	time.Sleep(2 * time.Second) // the last sessions' processes settle: their start's pages go
	r := row{sessions: n}
	var err error
	if r.guard, err = smaps(s.guard); err != nil {
		return r, err
	}
	if r.server, err = smaps(s.server); err != nil {
		return r, err
	}
	r.heap, err = scrape(s.admin, "go_memstats_heap_inuse_bytes")
	if err != nil {
		return r, err
	}
	var instances []string // r<pid>-<start>: not rdma.max and the like
	matches, _ := filepath.Glob(filepath.Join(root, "r[0-9]*-*"))
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			instances = append(instances, m)
		}
	}
	if len(instances) != 1 {
		return r, fmt.Errorf("%d instance cgroups under %s, want 1", len(instances), root)
	}
	inst := instances[0]
	r.instance = fileInt(filepath.Join(inst, "memory.current"))
	r.percpu = statValue(filepath.Join(inst, "memory.stat"), "percpu")
	filepath.WalkDir(inst, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		r.cgroups++
		pids := procs(path)
		r.processes += len(pids)
		rel, _ := filepath.Rel(inst, path)
		switch {
		case rel == "inits":
			r.initsLeaf = fileInt(filepath.Join(path, "memory.current"))
			for _, p := range pids {
				m, _ := smaps(p)
				r.inits, r.initsN = r.inits.add(m), r.initsN+1
			}
		case strings.HasPrefix(rel, "s-") && !strings.Contains(rel, "/"):
			r.slices += fileInt(filepath.Join(path, "memory.current"))
		}
		if strings.HasPrefix(rel, "s-") {
			for _, p := range pids {
				m, _ := smaps(p)
				r.tasks, r.tasksN = r.tasks.add(m), r.tasksN+1
			}
		}
		return nil
	})
	now, err := readMeminfo()
	if err != nil {
		return r, err
	}
	self, err := smaps(os.Getpid())
	if err != nil {
		return r, err
	}
	now.available += self.private
	r.kernel = now.sub(before)
	return r, nil
}

// procs returns the pids in a cgroup's cgroup.procs.
func procs(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	return pids
}

// smaps reads a process's RSS, PSS and private memory from /proc/PID/smaps_rollup.
func smaps(pid int) (mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return mem{}, err
	}
	var m mem
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kib, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "Rss:":
			m.rss = kib << 10
		case "Pss:":
			m.pss = kib << 10
		case "Private_Clean:", "Private_Dirty:":
			m.private += kib << 10
		}
	}
	return m, nil
}

// scrape returns one unlabelled sample of the admin endpoint's /metrics.
func scrape(admin, name string) (int64, error) {
	res, err := http.Get(admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("/metrics has no %s", name)
}

// fileInt reads a one-number cgroup file (0 where it cannot).
func fileInt(file string) int64 {
	b, _ := os.ReadFile(file)
	n, _ := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return n
}

// statValue reads key of a flat-keyed file (memory.stat, cgroup.stat; 0 where it lacks it).
func statValue(file, key string) int64 {
	b, _ := os.ReadFile(file)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+" "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// descendants returns the cgroups below root, live and dying (cgroup.stat).
func descendants(root string) (live, dying int64) {
	stat := filepath.Join(root, "cgroup.stat")
	return statValue(stat, "nr_descendants"), statValue(stat, "nr_dying_descendants")
}

// removeTree removes the cgroup root and what is left below it, deepest first.
func removeTree(root string) {
	var dirs []string
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if err := os.Remove(d); err != nil {
			fmt.Fprintln(os.Stderr, "density:", err)
		}
	}
}

// meminfo is what /proc/meminfo says of the kernel's memory, in bytes.
type meminfo struct{ total, available, slab, unreclaimable, percpu, stacks, pageTables int64 }

func readMeminfo() (meminfo, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return meminfo{}, err
	}
	defer f.Close()
	var m meminfo
	fields := map[string]*int64{"MemTotal:": &m.total, "MemAvailable:": &m.available, "Slab:": &m.slab, "SUnreclaim:": &m.unreclaimable,
		"Percpu:": &m.percpu, "KernelStack:": &m.stacks, "PageTables:": &m.pageTables}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if p, ok := fields[fs[0]]; ok && len(fs) > 1 {
			kib, _ := strconv.ParseInt(fs[1], 10, 64)
			*p = kib << 10
		}
	}
	return m, sc.Err()
}

func (m meminfo) sub(o meminfo) meminfo {
	return meminfo{m.total - o.total, m.available - o.available, m.slab - o.slab, m.unreclaimable - o.unreclaimable,
		m.percpu - o.percpu, m.stacks - o.stacks, m.pageTables - o.pageTables}
}

// printTables writes the figures at each count, then what each session added between counts.
func printTables(w io.Writer, rows []row, limits []string) {
	fmt.Fprintf(w, "Each session: its limits (%s) and one background `sleep`. MiB; PSS and private from smaps_rollup; /proc/meminfo figures are changes since before reaper started (MemTotal − MemAvailable less this client's own memory).\n\n", strings.Join(limits, " "))
	fmt.Fprintln(w, "| sessions | cgroups | processes | guard PSS | server PSS | server private | server Go heap | inits PSS (sum) | inits private (sum) | tasks PSS (sum) | slices memory.current | inits leaf memory.current | instance memory.current | instance percpu | Slab | Percpu | KernelStack + PageTables | MemTotal − MemAvailable |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.sessions, r.cgroups, r.processes, mib(r.guard.pss), mib(r.server.pss), mib(r.server.private), mib(r.heap),
			mib(r.inits.pss), mib(r.inits.private), mib(r.tasks.pss), mib(r.slices), mib(r.initsLeaf), mib(r.instance), mib(r.percpu),
			mib(r.kernel.slab), mib(r.kernel.percpu), mib(r.kernel.stacks+r.kernel.pageTables), mib(-r.kernel.available))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Per session added, between two counts (KiB):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| sessions | cgroups | processes | server private | inits private | tasks PSS | slices memory.current | instance memory.current | instance percpu | Slab | Percpu | KernelStack + PageTables | MemTotal − MemAvailable |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for i := 1; i < len(rows); i++ {
		a, b := rows[i-1], rows[i]
		per(w, fmt.Sprintf("%d → %d", a.sessions, b.sessions), a, b)
	}
	if len(rows) > 2 {
		per(w, fmt.Sprintf("%d → %d", rows[0].sessions, rows[len(rows)-1].sessions), rows[0], rows[len(rows)-1])
	}
}

// per writes a row of what each session added from a to b.
func per(w io.Writer, label string, a, b row) {
	n := float64(b.sessions - a.sessions)
	d := func(x, y int64) string { return fmt.Sprintf("%.0f", float64(y-x)/n/1024) }
	c := func(x, y int) string { return fmt.Sprintf("%.1f", float64(y-x)/n) }
	fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label,
		c(a.cgroups, b.cgroups), c(a.processes, b.processes), d(a.server.private, b.server.private), d(a.inits.private, b.inits.private),
		d(a.tasks.pss, b.tasks.pss), d(a.slices, b.slices), d(a.instance, b.instance), d(a.percpu, b.percpu),
		d(a.kernel.slab, b.kernel.slab), d(a.kernel.percpu, b.kernel.percpu),
		d(a.kernel.stacks+a.kernel.pageTables, b.kernel.stacks+b.kernel.pageTables), d(-a.kernel.available, -b.kernel.available))
}

// mib writes n bytes in MiB, to a tenth.
func mib(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }

// signedMiB writes n bytes in MiB with its sign.
func signedMiB(n int64) string { return fmt.Sprintf("%+.1f MiB", float64(n)/(1<<20)) }
