package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outputKinds are commands that print about 1 MB of output that is costly in its own way: control
// characters (each escaped as six bytes in JSON), binary (invalid UTF-8), one line, many short lines.
var outputKinds = []struct{ name, command string }{
	{"control", `head -c 1000000 /dev/zero | tr '\0' '\1'`},
	{"binary", `head -c 1000000 /dev/urandom`},
	{"one-line", `head -c 1000000 /dev/zero | tr '\0' a`},
	{"many-lines", `yes 0123456789 | head -c 1000000`},
}

// rss returns the resident set size and its peak (VmHWM) of pid, in bytes.
func rss(t testing.TB, pid int) (now, peak int64) {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			now = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return now, peak
}

// memoryRun is what one burst of concurrent calls did to the server's memory.
type memoryRun struct {
	base, peak, settled int64
	settle              time.Duration
}

// burst makes n concurrent bash calls of command on cs against the server pid and measures its RSS:
// before, at its peak (VmHWM, reset first), and settled, once it has stopped falling after the calls
// ended (or after 60 s).
func burst(t testing.TB, cs *mcp.ClientSession, pid, n int, command string) memoryRun {
	t.Helper()
	return burstOf(t, pid, n, func(int) (*mcp.CallToolResult, error) {
		return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
	})
}

// burstOf is burst with n concurrent calls of call(0) to call(n-1).
func burstOf(t testing.TB, pid, n int, call func(i int) (*mcp.CallToolResult, error)) memoryRun {
	t.Helper()
	var m memoryRun
	m.base, _ = rss(t, pid)
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := call(i)
			if err == nil && res.IsError {
				err = fmt.Errorf("tool error: %s", textOf(res))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	_, m.peak = rss(t, pid)
	ended := time.Now()
	low, since := int64(1<<62), time.Now()
	for time.Since(ended) < 60*time.Second {
		now, _ := rss(t, pid)
		if now < low-1<<20 {
			low, since = now, time.Now()
		}
		if time.Since(since) > 6*time.Second {
			break // no fall of 1 MiB for 6 s (three periods of the server's memory returner): settled
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.settled, m.settle = low, since.Sub(ended)
	return m
}

// Memory bound: with N calls under way at once, each returning up to the ceiling of a result's output
// L (1 MiB: max_output at its largest; the default, 30,000 characters, makes results far smaller), the
// server's resident memory stays below memoryBase + N x memoryPerCall x L. The README states it;
// BenchmarkMemory and TestMemoryBound measure it, with --max-output at the ceiling.
const (
	memoryBase    = 32 << 20
	memoryPerCall = 10
	outputLimit   = 1 << 20
	// memorySettled is how far above its resident memory before a burst the server may stay once
	// the burst is over.
	memorySettled = 16 << 20
)

func memoryBound(n int) int64 { return memoryBase + int64(n)*memoryPerCall*outputLimit }

// connectMemory starts a reaper over transport ("stdio" or "http") and returns a client session and
// the server's pid.
func connectMemory(t testing.TB, transport string) (*mcp.ClientSession, int) {
	t.Helper()
	args := append(cgroupArgs(t), "--max-output", strconv.Itoa(outputLimit))
	if transport == "stdio" {
		cs, cmd, _ := connectStdio(t, args...)
		return cs, serverOf(t, cmd.Process.Pid)
	}
	p := startHTTP(t, args...)
	return p.connect(t), serverOf(t, p.cmd.Process.Pid)
}

// BenchmarkMemory runs 16 concurrent foreground calls, each printing about 1 MB of one kind of
// output, against a reaper over stdio and over HTTP, and reports the server's resident memory
// before, at its peak and once settled after the calls, beside the bound the README states.
//
//	go test -run '^$' -bench BenchmarkMemory -benchtime 1x ./test/e2e
func BenchmarkMemory(b *testing.B) {
	const n = 16
	for _, transport := range []string{"stdio", "http"} {
		for _, kind := range outputKinds {
			b.Run(transport+"/"+kind.name, func(b *testing.B) {
				cs, pid := connectMemory(b, transport)
				bash(b, cs, "true")
				var m memoryRun
				for range b.N {
					m = burst(b, cs, pid, n, kind.command)
				}
				b.ReportMetric(float64(m.base)/(1<<20), "base-MiB")
				b.ReportMetric(float64(m.peak)/(1<<20), "peak-MiB")
				b.ReportMetric(float64(m.settled)/(1<<20), "settled-MiB")
				b.ReportMetric(m.settle.Seconds(), "settle-s")
				b.ReportMetric(float64(memoryBound(n))/(1<<20), "bound-MiB")
			})
		}
	}
}

// TestMemoryBound: 16 concurrent calls each printing a megabyte of control characters, the costliest
// output to carry in JSON, keep the server below the stated bound, and its memory falls back after.
func TestMemoryBound(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped: the race detector multiplies memory use; the bound is for the shipped binary (run without -race)")
	}
	const n = 16
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			cs, pid := connectMemory(t, transport)
			bash(t, cs, "true")
			m := burst(t, cs, pid, n, outputKinds[0].command)
			t.Logf("RSS before %d MiB, peak %d MiB (bound %d MiB), settled %d MiB after %v",
				m.base>>20, m.peak>>20, memoryBound(n)>>20, m.settled>>20, m.settle.Round(100*time.Millisecond))
			if m.peak > memoryBound(n) {
				t.Errorf("peak RSS %d MiB over the bound of %d MiB", m.peak>>20, memoryBound(n)>>20)
			}
			if m.settled > m.base+memorySettled {
				t.Errorf("RSS settled at %d MiB, more than %d MiB above the %d MiB before the calls", m.settled>>20, memorySettled>>20, m.base>>20)
			}
		})
	}
}

// TestMemoryBoundTaskOutput: 16 concurrent task_output calls, each reading as much as a result may
// hold of a finished 2 MB task (1 MiB, in one read where the result can carry it, from the task's
// file), keep the server below the bound that holds for 16 calls.
func TestMemoryBoundTaskOutput(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped: the race detector multiplies memory use; the bound is for the shipped binary (run without -race)")
	}
	const n, size = 16, 2000000
	for _, kind := range []struct{ name, char string }{{"one-line", "a"}, {"control", `\1`}} {
		t.Run(kind.name, func(t *testing.T) {
			cs, cmd, _ := connectStdio(t, append(cgroupArgs(t), "--max-tasks", strconv.Itoa(n), "--max-output", strconv.Itoa(outputLimit))...)
			pid := serverOf(t, cmd.Process.Pid)
			bash(t, cs, "true")
			ids := make([]string, n)
			for i := range ids {
				res := callTool(t, cs, "bash", map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' '%s'", size, kind.char), "run_in_background": true})
				ids[i] = taskID(t, res)
			}
			testutil.Eventually(t, "the tasks' ends", func() bool {
				var l struct {
					Tasks []struct{ Status string } `json:"tasks"`
				}
				decode(t, callTool(t, cs, "task_list", nil), &l)
				done := 0
				for _, task := range l.Tasks {
					if task.Status == "completed" {
						done++
					}
				}
				return done == n
			})
			got := make([]int, n)
			m := burstOf(t, pid, n, func(i int) (*mcp.CallToolResult, error) {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_output", Arguments: map[string]any{"task_id": ids[i]}})
				if err == nil {
					got[i] = len(payload(res))
				}
				return res, err
			})
			bound := memoryBound(n)
			t.Logf("RSS before %d MiB, peak %d MiB (bound %d MiB), settled %d MiB after %v; first reads of %d to %d bytes",
				m.base>>20, m.peak>>20, bound>>20, m.settled>>20, m.settle.Round(100*time.Millisecond), slices.Min(got), slices.Max(got))
			if m.peak > bound {
				t.Errorf("peak RSS %d MiB over the bound of %d MiB", m.peak>>20, bound>>20)
			}
			if kind.char == "a" && slices.Min(got) < outputLimit {
				t.Errorf("a read of a finished 2 MB task returned %d bytes, less than the %d a result may hold", slices.Min(got), outputLimit)
			}
		})
	}
}
