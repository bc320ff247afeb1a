package reaper

import (
	"context"
	"fmt"
	"slices"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/systemd"
)

// A Reaper whose own cgroup it cannot take over (its MCP client's, a login session's scope) moves
// into a transient scope systemd delegates to it, as `systemd-run --scope -p Delegate=yes` makes one.
// Only the server moves; its guard stays where it was (see docs/containment.md).

// scopeMayHelp reports whether a scope of its own could give the Reaper what its default root
// cannot: never where a root or mountpoint was asked for (the operator's choice), nor without
// cgroup2; on a hybrid host, whose controllers are cgroup v1's, only a cgroup it can write to. A
// scope has no controller the mount's top does not offer: where the limits need one, it can give
// only a cgroup to write to, and only where the Reaper would settle for that (not ContainCgroup).
func (r *Reaper) scopeMayHelp() bool {
	if r.opts.Cgroup.Root != "" || r.opts.Cgroup.Mountpoint != "" {
		return false
	}
	info := cgroup.Detect(r.opts.Cgroup)
	switch info.Mode {
	case cgroup.Unified:
		for _, c := range limitControllers(r.opts.SessionLimits) {
			if !slices.Contains(info.TopControllers, c) {
				return !info.Usable() && r.opts.Containment != ContainCgroup
			}
		}
		return true
	case cgroup.Hybrid:
		return !info.Usable()
	}
	return false
}

// inScope asks systemd for a delegated scope holding this process (the system manager as root, the
// user's own manager otherwise: internal/systemd) and records it; the root is then opened there.
func (r *Reaper) inScope() error {
	sc, err := systemd.Start(context.Background(), systemd.Options{
		Name:        "reaper-" + r.name + ".scope",
		Description: fmt.Sprintf("reaper (pid %d): its server and its sessions' processes", r.pid),
		Pids:        []int{r.pid},
		RuntimeDir:  r.opts.RuntimeDir,
	})
	if err != nil {
		return fmt.Errorf("no delegated scope of its own: %w", err)
	}
	r.info.Scope, r.info.ScopeManager = sc.Unit, "systemd's "+sc.Manager
	return nil
}

// noScopeText is what the reasons for process containment and for limits not applied end with:
// why there is no scope of its own, where one was asked for.
func (r *Reaper) noScopeText() string {
	if r.info.NoScope == "" {
		return ""
	}
	return "; " + r.info.NoScope
}
