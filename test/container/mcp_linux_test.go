package container

import (
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP client side: the go-sdk client on the host, talking to reaper in a container.

// connectStdio starts cmd (a `podman run -i`) and connects the go-sdk client to it over stdio, at
// the go-sdk client's default revision. Cleanup closes the client.
func connectStdio(t *testing.T, cmd *exec.Cmd) *mcp.ClientSession {
	t.Helper()
	return mcptest.ConnectCommand(t, cmd, mcptest.Options{})
}

// connect connects the go-sdk client to s as a session (MCP 2025-11-25: the tools then need no
// workspace handle), with s's token. Cleanup closes the client (DELETE).
func (s *sidecar) connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	return connectHTTPWith(t, s.url, nil, s.token)
}

// connectHTTPWith connects to url with the HTTP client hc (nil: the default one), and token if set.
func connectHTTPWith(t *testing.T, url string, hc *http.Client, token string) *mcp.ClientSession {
	t.Helper()
	return mcptest.ConnectHTTP(t, url, mcptest.Options{HTTPClient: hc, Token: token})
}

// callTool calls a tool and decodes its structured result into out, failing the test on a protocol
// error or a tool error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res := mcptest.CallInto(t, cs, name, args, out)
	if res.IsError {
		t.Fatalf("%s(%.200v): tool error: %s", name, args, mcptest.Text(res))
	}
}

// escapeScript is a background task that starts one process of each kind that gets away from a
// cleanup by process group or parent pid, and prints each one's kind and pid (in the container's pid
// namespace) once it runs, then its own:
//   - setsid: a new session and process group;
//   - double-fork: its parent exits at once, so it is reparented;
//   - nohup: ignores SIGHUP;
//   - ignores-sigterm: survives a polite SIGTERM, so a stop must escalate to SIGKILL;
//   - unmarked: clears its environment (reaper's marker), takes a new session and is reparented. In
//     process containment nothing ties it to its session: it survives the session's end and dies
//     when reaper stops. In cgroup containment its cgroup ties it.
//   - records-sigterm: a new session; on SIGTERM it appends its kind to sigtermFile and exits. Only
//     reaper's teardown sends it SIGTERM: the kernel's end of a pid namespace and a killed
//     container's cgroup send SIGKILL alone, and `podman stop` signals PID 1 only. So the record
//     shows that reaper itself ended the session, where the container's end would kill the rest
//     anyway.
const escapeScript = `setsid sh -c 'echo setsid $$; exec sleep 1000' &
sh -c 'sh -c "echo double-fork \$\$; exec sleep 1000" &'
nohup sh -c 'echo nohup $$; exec sleep 1000' &
sh -c 'trap "" TERM; echo ignores-sigterm $$; exec sleep 1000' &
env -i /bin/setsid /bin/sh -c '/bin/sh -c "echo unmarked \$\$; exec /bin/sleep 1000" &'
setsid sh -c 'trap "echo records-sigterm >>` + sigtermFile + `; exit 0" TERM; echo records-sigterm $$; sleep 1000 & wait' &
echo task $$
echo ns $(readlink /proc/$$/ns/pid)
exec sleep 1000`

// shared is where each container mounts a directory of the test, and sigtermFile the file in it
// where the records-sigterm escapee writes.
const (
	shared      = "/reaper-test"
	sigtermFile = shared + "/sigterm"
)

// escapeKinds are the kinds escapeScript prints.
var escapeKinds = []string{"setsid", "double-fork", "nohup", "ignores-sigterm", "unmarked", "records-sigterm", "task"}

// escapees runs escapeScript as a background task of the session cs, in container c, and returns its
// processes by kind, identified on the host.
func escapees(t *testing.T, cs *mcp.ClientSession, c container) map[string]testutil.Proc {
	t.Helper()
	var started struct {
		TaskID string `json:"task_id"`
	}
	callTool(t, cs, "bash", map[string]any{"command": escapeScript, "run_in_background": true}, &started)
	if started.TaskID == "" {
		t.Fatal("the background task got no task id")
	}
	printed := map[string]int{}
	var all, ns string
	deadline := time.Now().Add(time.Minute)
	for len(printed) < len(escapeKinds) || ns == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the task printed only %q", all)
		}
		var read struct {
			Output string `json:"output"`
		}
		callTool(t, cs, "task_output", map[string]any{"task_id": started.TaskID}, &read)
		all += read.Output
		for line := range strings.Lines(read.Output) {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == "ns" {
				ns = f[1] // the session's PID namespace, where reaper made one inside the container
				continue
			}
			if len(f) != 2 || !slices.Contains(escapeKinds, f[0]) {
				t.Fatalf("the task printed %q", line)
			}
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("the task printed %q", line)
			}
			printed[f[0]] = pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	procs := c.procs()
	if hosts := testutil.HostPids(ns); ns != c.pidNS && hosts != nil {
		procs = map[int]testutil.Proc{}
		for nspid, pid := range hosts {
			if p, ok := testutil.ProcOf(pid); ok {
				procs[nspid] = p
			}
		}
	}
	out := map[string]testutil.Proc{}
	for kind, pid := range printed {
		p, ok := procs[pid]
		if !ok {
			t.Fatalf("%s: no process with pid %d in container %s's pid namespace", kind, pid, c.name)
		}
		out[kind] = p
	}
	return out
}

// without returns the processes of ps but those of the given kinds.
func without(ps map[string]testutil.Proc, kinds ...string) []testutil.Proc {
	var out []testutil.Proc
	for _, k := range slices.Sorted(maps.Keys(ps)) {
		if !slices.Contains(kinds, k) {
			out = append(out, ps[k])
		}
	}
	return out
}
