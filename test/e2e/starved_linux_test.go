package e2e

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// starvedLimit is the descriptor limit reaper runs under in TestTeardownStarvedOfDescriptors: room for
// what it needs at rest (the runtime, its listener, its state, its reserve: about 50) and a session's.
const starvedLimit = 160

// TestTeardownStarvedOfDescriptors: a session that ends while reaper's descriptor table is full (a
// local user's idle connections hold every slot; reaper runs under a low RLIMIT_NOFILE so that a test
// can fill it) still kills everything it started, escapees included (setsid, double fork, SIGTERM
// ignored, replaced on SIGTERM), in both containment modes, with PID namespaces and without; and the
// line of its end says how many remain only for what really does.
func TestTeardownStarvedOfDescriptors(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("skipped: no prlimit (util-linux) to start reaper with a low descriptor limit")
	}
	eachModeAndNamespace(t, func(t *testing.T, p placement, ns string) {
		cmd := reaperCmd(append(append([]string{"serve", "--http", "127.0.0.1:0"}, p.args()...),
			"--pid-namespace", ns, "--idle-timeout", "10s", "--grace", "500ms",
			"--max-connections", "4096", "--max-connections-per-peer", "4096")...)
		cmd.Args = append([]string{"prlimit", "--nofile=" + strconv.Itoa(starvedLimit)}, append([]string{cmd.Path}, cmd.Args[1:]...)...)
		cmd.Path = prlimit
		r := startCmd(t, cmd, nil, nil)
		r.awaitServing(t)
		server := serverOf(t, r.cmd.Process.Pid)
		_, ps := hostile(t, r.connect(t))

		// Fill the server's descriptor table with connections that never send a byte, and keep
		// some more waiting in the listen queue, which take any slot that frees.
		u, err := url.Parse(r.url)
		if err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		t.Cleanup(func() {
			for _, c := range conns {
				c.Close()
			}
		})
		for len(conns) < 2*starvedLimit {
			c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
			if err != nil {
				t.Fatalf("connection %d: %v", len(conns), err)
			}
			conns = append(conns, c)
		}
		// The server accepts them as it gets to them (a loaded machine takes a while).
		for deadline := time.Now().Add(time.Minute); openFiles(server) < starvedLimit; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the server holds %d descriptors of %d after %d connections and a minute: the test could not fill its table", openFiles(server), starvedLimit, len(conns))
			}
		}
		if _, ended := testutil.LogLine(r.stderr.String(), "session ended"); ended {
			t.Fatalf("the session ended before the test had filled the server's table (a slow machine)")
		}
		// The session idles out meanwhile (10 s without a request), while the connections left in
		// the listen queue take every slot that frees.
		deadline := time.Now().Add(time.Minute)
		var end map[string]string
		for {
			var ok bool
			if end, ok = testutil.LogLine(r.stderr.String(), "session ended"); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the session did not end within a minute:\n%s", tail(r.stderr.String()))
			}
			time.Sleep(20 * time.Millisecond)
		}
		alive := testutil.Alive(ps)
		if len(alive) > 0 {
			testutil.AwaitDead(t, alive, 5*time.Second) // the test fails if they live on
		}
		if end["remaining"] != "0" {
			t.Errorf("the session's end says remaining=%s, and every process is dead: %v", end["remaining"], end)
		}
		if n, _ := strconv.Atoi(end["processes_ended"]); n < len(ps) {
			t.Errorf("the session's end counts %d processes ended, want %d at least: %v", n, len(ps), end)
		}
		t.Logf("the session's end, its table full: %v", end)
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	})
}

// openFiles counts the descriptors pid holds.
func openFiles(pid int) int {
	entries, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(entries)
}

// tail is the end of a log, for a failure message.
func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}
