package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// massSessions is how many sessions the tests of many sessions ending at once open: enough that
// teardowns that take turns over work growing with the sessions still alive take minutes.
const massSessions = 150

// TestShutdownOfManySessions ends a server holding many live sessions, each with a setsid process
// that its init (or reaper) adopts and a background task, by one SIGTERM: every session ends, every
// process of theirs dies and the server exits, within a generous deadline. The escapee checks that
// the sessions' teardowns run take turns, and each looked under the init of every session not yet
// torn down, reading the whole instance's slice once for each: of 150 sessions 60 had ended a minute
// after SIGTERM, the others' processes alive all that time.
func TestShutdownOfManySessions(t *testing.T) {
	eachModeAndNamespace(t, func(t *testing.T, pl placement, ns string) {
		p, tag, _ := startBusy(t, pl, ns, massSessions, "1s", "")
		p.cmd.Process.Signal(syscall.SIGTERM)
		awaitShutdown(t, p, tag, "SIGTERM")
	})
}

// TestSecondSignalHurriesManySessions ends many live sessions whose processes ignore SIGTERM, with a
// grace period of ten minutes, by two SIGTERMs: the second cuts every grace period short, of the
// teardowns under way and of those yet to begin, and every process dies within a generous deadline.
// In cgroup containment with PID namespaces, where every session's init was an adopter to look under
// (TestShutdownOfManySessions covers every mode).
func TestSecondSignalHurriesManySessions(t *testing.T) {
	needPIDNamespaces(t)
	p, tag, _ := startBusy(t, place(t, "cgroup"), "on", massSessions, "10m", "trap '' TERM; ")
	p.cmd.Process.Signal(syscall.SIGTERM)
	awaitFirstSignal(t, p) // the teardowns begin; a second SIGTERM sent before could merge with the first
	select {
	case <-p.done:
		t.Fatalf("reaper exited on the first SIGTERM, with a grace period of 10 minutes for processes that ignore it")
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	awaitShutdown(t, p, tag, "the second SIGTERM")
}

// awaitShutdown waits a minute for p to exit after signal, then fails the test for each of tag's
// processes alive and for each session that has not logged its end by shutdown.
func awaitShutdown(t *testing.T, p *reaperProc, tag, signal string) {
	t.Helper()
	signalled := time.Now()
	select {
	case <-p.done:
	case <-time.After(testutil.Slow(time.Minute)):
		ended := endsFor(p.stderr.String(), "shutdown")
		left := len(sleepers(tag))
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("reaper has not exited a minute after %s: %d of %d sessions ended, %d of their processes alive", signal, ended, massSessions, left)
	}
	t.Logf("reaper exited %v after %s", time.Since(signalled).Round(time.Millisecond), signal)
	if strings.Contains(p.stderr.String(), "shutdown is stuck") {
		t.Errorf("the shutdown was cut short by its last resort, not ended")
	}
	if left := sleepers(tag); len(left) > 0 {
		t.Errorf("%d processes of the sessions outlived reaper: %v", len(left), left)
	}
	if n := endsFor(p.stderr.String(), "shutdown"); n != massSessions {
		t.Errorf("%d sessions logged their end by shutdown, want %d", n, massSessions)
	}
}

// TestDeleteStormOfManySessions ends many live sessions (see TestShutdownOfManySessions) by DELETEs
// sent at once: each is answered, every process of the sessions dies, within a generous deadline. In
// cgroup containment with PID namespaces (see TestSecondSignalHurriesManySessions).
func TestDeleteStormOfManySessions(t *testing.T) {
	needPIDNamespaces(t)
	p, tag, made := startBusy(t, place(t, "cgroup"), "on", massSessions, "1s", "")
	start := time.Now()
	var mu sync.Mutex
	var slowest time.Duration
	err := parallel(len(made), 32, func(i int) error {
		code, took, err := p.sendDelete(made[i].ID())
		if err == nil && code != http.StatusNoContent {
			err = fmt.Errorf("DELETE answered %d, want %d", code, http.StatusNoContent)
		}
		mu.Lock()
		slowest = max(slowest, took)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d DELETEs, 32 at a time, answered in %v (the slowest in %v)", len(made), time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond))
	if left := sleepers(tag); len(left) > 0 {
		t.Errorf("%d processes of the deleted sessions outlived their DELETE's answer: %v", len(left), left)
	}
	testutil.Eventually(t, "every session logs its end", func() bool { return endsFor(p.stderr.String(), "delete") == massSessions })
}

// startBusy starts reaper over HTTP with the grace period grace, and n sessions in it, each with a
// setsid process (adopted by its init, or reaper, once the shell has ended) and a background task,
// both `sleep tag` (see sleepers), and both started by shell code that begins with prelude. It
// returns the server, tag and the sessions.
func startBusy(t testing.TB, pl placement, ns string, n int, grace, prelude string) (*reaperProc, string, []*mcp.ClientSession) {
	t.Helper()
	p := startHTTP(t, append(pl.args(), "--pid-namespace", ns, "--grace", grace)...)
	tag := uniqueSleep()
	t.Cleanup(func() { killSleepers(tag) }) // after the test's checks and the sessions' closes
	made := busySessions(t, p, n, func(cs *mcp.ClientSession) error {
		if _, err := bashCall(cs, map[string]any{"command": prelude + "setsid sleep " + tag + " > /dev/null 2>&1 & echo x"}); err != nil {
			return err
		}
		_, err := bashCall(cs, map[string]any{"command": prelude + "exec sleep " + tag, "run_in_background": true})
		return err
	})
	// A background task's shell may not have exec'd sleep yet when its call returns.
	for deadline := time.Now().Add(testutil.Slow(30 * time.Second)); ; time.Sleep(100 * time.Millisecond) {
		got := len(sleepers(tag))
		if got == 2*n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes run `sleep %s`, want %d (two per session)", got, tag, 2*n)
		}
	}
	return p, tag, made
}

// endsFor counts the lines of log that say a session ended for reason.
func endsFor(log, reason string) int {
	n := 0
	for line := range strings.Lines(log) {
		if end, ok := testutil.LogLine(line, "session ended"); ok && end["reason"] == reason {
			n++
		}
	}
	return n
}

// busySessions opens n sessions with p, 8 at a time, and gives each the processes use starts; it
// fails the test if one cannot be opened or used, and returns them. Cleanup closes them.
func busySessions(t testing.TB, p *reaperProc, n int, use func(*mcp.ClientSession) error) []*mcp.ClientSession {
	t.Helper()
	var mu sync.Mutex
	var made []*mcp.ClientSession
	t.Cleanup(func() { closeSessions(made, 8) })
	err := parallel(n, 8, func(int) error {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Slow(time.Minute))
		defer cancel()
		cs, err := mcptest.DialHTTP(ctx, p.url, mcptest.Options{Token: p.token})
		if err != nil {
			return err
		}
		mu.Lock()
		made = append(made, cs)
		mu.Unlock()
		return use(cs)
	})
	if err != nil {
		t.Fatal(err)
	}
	return made
}

// bashCall runs the bash tool with args and returns its text, or why it failed.
func bashCall(cs *mcp.ClientSession, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Slow(time.Minute))
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: args})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", fmt.Errorf("bash %v: tool error: %s", args["command"], textOf(res))
	}
	return textOf(res), nil
}

// uniqueSleep returns a duration for sleep (about 1000 seconds) that no other process on the machine
// sleeps for: the processes of one test are found by it (see sleepers).
func uniqueSleep() string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("1000.%09d", binary.BigEndian.Uint32(b[:])%1_000_000_000)
}

// sleepers returns the live processes, anywhere on the machine, that run `sleep tag`.
func sleepers(tag string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if !sleeps(pid, tag) {
			continue
		}
		if p, ok := testutil.ProcOf(pid); ok && testutil.Running(p) {
			out = append(out, pid)
		}
	}
	return out
}

// sleeps reports whether pid runs `sleep tag`.
func sleeps(pid int, tag string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.HasSuffix(b, []byte("sleep\x00"+tag+"\x00"))
}

// killSleepers SIGKILLs what reaper left of a test's `sleep tag` processes, so that a failing test
// leaves none: each through a pidfd opened before its command line is checked again, so that a pid
// reused meanwhile is never signalled.
func killSleepers(tag string) {
	for _, pid := range sleepers(tag) {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if sleeps(pid, tag) {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		unix.Close(fd)
	}
}
