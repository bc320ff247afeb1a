package reaper

import (
	"context"

	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
)

// KillReport says what a teardown (Session.Close, a task stop or timeout) did.
type KillReport = kill.Report

// Proc describes a process in reports: what outlived a kill, what a dead instance left.
type Proc = proc.Proc

// terminate ends every process of sc by the kill policy (see kill.Policy.Terminate) and tells the
// Observer what it did.
func (r *Reaper) terminate(ctx context.Context, sc kill.Scope) (KillReport, error) {
	rep, err := r.policy.Terminate(ctx, sc)
	r.obs.Teardown(rep)
	return rep, err
}
