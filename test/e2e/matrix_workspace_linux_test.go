package e2e

import (
	"syscall"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// viaWorkspace runs a scenario in a workspace (protocol 2026-07-28 over HTTP) and ends it by the
// column's end: workspace_close (answered within half a second, while the teardown goes on: the
// check runs meanwhile); the lease running out, 2 s after the last call; or reaper and its guard
// killed and reaper started again (its sweep ends what the dead instance left).
func (sc *scenario) viaWorkspace() {
	t := sc.t
	var extra []string
	if sc.end.name == "workspace expiry" {
		extra = []string{"--idle-timeout", "2s"}
	}
	r := startHTTP(t, sc.reaperArgs(extra...)...)
	sc.guard, sc.done, sc.served = r.cmd.Process.Pid, r.done, r
	w, _ := mcptest.OpenWorkspace(t, mcptest.ConnectHTTP(t, r.url, mcptest.Options{Protocol: mcptest.Workspaces, Token: r.token}))
	bash(t, w, sc.script("1000"), "run_in_background", true)
	lastCall := time.Now()
	var renew func()
	if sc.end.name == "workspace expiry" {
		// A call that names the workspace renews its lease, so that it runs out only once the rows
		// all run.
		renew = func() {
			bash(t, w, "true")
			lastCall = time.Now()
		}
	}
	sc.awaitRowsRenewing(renew)
	sc.ended = time.Now()
	switch sc.end.name {
	case "workspace_close":
		sc.meanwhile(func() {
			if res, err := w.CallTool(t.Context(), &mcp.CallToolParams{Name: "workspace_close", Arguments: map[string]any{}}); err != nil || res.IsError {
				t.Errorf("workspace_close: %v %s", err, textOf(res))
			}
		})
	case "workspace expiry":
		sc.ended = lastCall // the lease runs from there
	case "workspace restart":
		// Stopped first, so that neither can act on the other's death.
		server := serverOf(t, sc.guard)
		for _, pid := range []int{sc.guard, server} {
			syscall.Kill(pid, syscall.SIGSTOP)
		}
		for _, pid := range []int{server, sc.guard} {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		<-r.done
		sc.ended = time.Now()
		again := startHTTP(t, sc.reaperArgs()...)
		sc.done, sc.served = again.done, again
	}
}
