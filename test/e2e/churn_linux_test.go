package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Churn: many HTTP sessions, a few at a time, each with a foreground command and a background task
// with a setsid child; half end by DELETE, half are abandoned (the client's connections cut, no
// DELETE) to the idle timeout. Afterwards nothing of them may be left: no process, no cgroup, no
// descriptor or goroutine of reaper beyond a small constant, and reaper's memory within a bound.

const (
	churnSessions    = 200
	churnConcurrency = 8
	churnIdle        = 5 * time.Second
	// churnHold is how long each session keeps its task running before it ends, so that the
	// sessions overlap as a busy agent platform's do (200 sessions take about a minute).
	churnHold = 1500 * time.Millisecond
)

func TestChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("churn runs for about a minute; not in -short")
	}
	p := place(t, "")
	r, admin := startAdmin(t, append(p.args(), "--grace", "1s", "--idle-timeout", churnIdle.String())...)
	server := serverOf(t, r.cmd.Process.Pid)
	mark := "E2E_CHURN=" + testutil.UniqueName("churn")
	t.Cleanup(func() { killMarked(mark) })

	// The baseline: reaper after one whole session, so that what is made once (the first slice's
	// parents, pools, the HTTP server's goroutines) is not counted as a leak.
	warm := r.connect(t)
	bash(t, warm, "true")
	warm.Close()
	awaitNoSessionCgroups(t, p)
	before := measure(t, server, admin)

	dir := t.TempDir()
	var mu sync.Mutex
	var all []testutil.Proc // every process the sessions' tasks recorded
	// ended counts the DELETEs reaper answered; unanswered those the client gave up on (the go-sdk
	// waits 5 s): on a loaded machine one may not reach reaper, whose idle timeout then ends the
	// session instead.
	var ended, abandoned, unanswered atomic.Int64
	errs := make(chan error, churnSessions)
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range churnConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				abandon := i%2 == 1
				ps, deleted, err := churnSession(r, mark, filepath.Join(dir, strconv.Itoa(i)), abandon)
				mu.Lock()
				all = append(all, ps...)
				mu.Unlock()
				switch {
				case err != nil:
					errs <- fmt.Errorf("session %d: %w", i, err)
				case abandon:
					abandoned.Add(1)
				case deleted:
					ended.Add(1)
				default:
					unanswered.Add(1)
				}
			}
		}()
	}
	for i := range churnSessions {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	took := time.Since(start)

	// Every session has ended (the last abandoned ones by the idle timeout): nothing may be left.
	testutil.AwaitDead(t, all, churnIdle+10*time.Second)
	testutil.Eventually(t, "no process carrying the churn's mark", func() bool { return len(marked(mark)) == 0 })
	awaitNoSessionCgroups(t, p)
	awaitSample(t, admin, "reaper_sessions_active", equal(0))
	awaitSample(t, admin, `reaper_sessions_ended_total{reason="idle"}`, atLeast(float64(abandoned.Load())))
	awaitSample(t, admin, `reaper_sessions_ended_total{reason="delete"}`, atLeast(float64(ended.Load())))
	if n := unanswered.Load(); n > churnSessions/8 { // a few on a loaded machine; many is reaper's doing
		t.Errorf("reaper answered only %d of %d DELETEs within the client's 5 s", ended.Load(), ended.Load()+n)
	}

	// What reaper holds settles once the teardowns' goroutines have returned.
	var after usage
	limit := before
	limit.fds += 8
	limit.goroutines += 10
	limit.rssKiB = 2*before.rssKiB + 32<<10
	deadline := time.Now().Add(15 * time.Second)
	for {
		after = measure(t, server, admin)
		if after.within(limit) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d sessions (%d ended by DELETE, %d DELETEs given up on by the client, %d abandoned to a %v idle timeout), %d at a time, in %v; %d recorded processes all dead",
		churnSessions, ended.Load(), unanswered.Load(), abandoned.Load(), churnIdle, churnConcurrency, took.Round(time.Second), len(all))
	t.Logf("reaper's server before: %s; after: %s", before, after)
	if !after.within(limit) {
		t.Errorf("reaper holds more after the churn than the bound (%s): %s", limit, after)
	}

	cs := r.connect(t)
	if got := bash(t, cs, "echo still serving").Output; got != "still serving\n" {
		t.Errorf("after the churn: %q", got)
	}
}

// churnSession runs one session: a foreground command, then a background task whose setsid child
// and own shell record their pids in file; it holds the session for churnHold and then ends it by
// DELETE or abandons it. It returns the processes recorded, and whether reaper answered the DELETE.
func churnSession(r *reaperProc, mark, file string, abandon bool) (ps []testutil.Proc, deleted bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hc := newCuttableClient()
	cs, err := mcptest.DialHTTP(ctx, r.url, mcptest.Options{HTTPClient: hc.Client, Token: r.token})
	if err != nil {
		return nil, false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		deleted = cs.Close() == nil && !abandon // Close sends the DELETE
		hc.CloseIdleConnections()               // as the client's process would on exit
	}()
	call := func(args map[string]any) (bashResult, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: args})
		if err != nil {
			return bashResult{}, err
		}
		var out bashResult
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		if res.IsError {
			return out, fmt.Errorf("%s", textOf(res))
		}
		return out, nil
	}
	if out, err := call(map[string]any{"command": "echo foreground"}); err != nil || out.Output != "foreground\n" {
		return nil, false, fmt.Errorf("foreground command: %q, %v", out.Output, err)
	}
	script := fmt.Sprintf(`%s setsid sh -c 'echo $$ >> %[2]s; exec sleep 1000' & echo $$ $(%[3]s) >> %[2]s; export %[1]s; exec sleep 1000`, mark, file, testutil.ShowNS)
	task, err := call(map[string]any{"command": script, "run_in_background": true})
	if err != nil {
		return nil, false, fmt.Errorf("background task: %w", err)
	}
	// The client asks for the task's output while it waits, as an agent polling its task does.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if b, _ := os.ReadFile(file); strings.Count(string(b), "\n") >= 2 {
			hosts := testutil.HostPids(testutil.NSIn(string(b)))
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					continue // the namespace
				}
				if hosts != nil {
					pid = hosts[pid]
				}
				p, ok := testutil.ProcOf(pid)
				if !ok {
					return ps, false, fmt.Errorf("the task's process %d died before its session ended", pid)
				}
				ps = append(ps, p)
			}
			break
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "task_output", Arguments: map[string]any{"task_id": task.TaskID}})
		if err != nil {
			return nil, false, fmt.Errorf("task_output: %w", err)
		}
		if res.IsError {
			return nil, false, fmt.Errorf("task_output: %s", textOf(res))
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(file)
			return nil, false, fmt.Errorf("the task's processes did not start: pids %q; task_output: %s", b, textOf(res))
		}
	}
	time.Sleep(churnHold)
	if abandon {
		hc.cut() // the client vanishes: no DELETE reaches reaper, whose idle timeout must end the session
	}
	return ps, false, nil // deleted is set as the session closes
}

// cuttableClient is an HTTP client whose connections can all be cut at once, after which it cannot
// reach anything: a client that vanished.
type cuttableClient struct {
	*http.Client
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func newCuttableClient() *cuttableClient {
	c := &cuttableClient{}
	var d net.Dialer
	c.Client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.dead {
			return nil, fmt.Errorf("the client has vanished")
		}
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			c.conns = append(c.conns, conn)
		}
		return conn, err
	}}}
	return c
}

func (c *cuttableClient) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead = true
	for _, conn := range c.conns {
		conn.Close()
	}
}

// usage is what reaper's server process holds.
type usage struct {
	fds, goroutines int
	rssKiB          int
}

func (u usage) String() string {
	return fmt.Sprintf("%d fds, %d goroutines, %d KiB RSS", u.fds, u.goroutines, u.rssKiB)
}

func (u usage) within(limit usage) bool {
	return u.fds <= limit.fds && u.goroutines <= limit.goroutines && u.rssKiB <= limit.rssKiB
}

// measure reads the server's descriptors and RSS from /proc, and its goroutines from its metrics.
func measure(t testing.TB, pid int, admin string) usage {
	t.Helper()
	_, body := testutil.Get(t, admin+"/metrics", "")
	g, ok := sample(body, "go_goroutines")
	if !ok {
		t.Fatalf("no go_goroutines in reaper's metrics:\n%s", body)
	}
	u := usage{goroutines: int(g)}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatalf("reaper's descriptors: %v", err)
	}
	u.fds = len(fds)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("reaper's status: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			u.rssKiB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return u
}

// awaitNoSessionCgroups waits until no session slice is left under the placement's root.
func awaitNoSessionCgroups(t testing.TB, p placement) {
	t.Helper()
	if p.root == "" {
		return
	}
	testutil.Eventually(t, "no session cgroup left", func() bool {
		left, _ := filepath.Glob(filepath.Join(p.root, "r*", "s-*"))
		return len(left) == 0
	})
}
