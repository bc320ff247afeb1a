package reaper

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cgreaper/reaper/cgroup"
)

// limitControllers names the controllers each limit needs.
func limitControllers(l cgroup.Limits) []string {
	var need []string
	if l.MemoryMax > 0 {
		need = append(need, "memory")
	}
	if l.PidsMax > 0 {
		need = append(need, "pids")
	}
	if l.CPUs > 0 {
		need = append(need, "cpu")
	}
	return need
}

// without returns l less the limits that need one of the controllers.
func without(l cgroup.Limits, controllers []string) cgroup.Limits {
	if slices.Contains(controllers, "memory") {
		l.MemoryMax = 0
	}
	if slices.Contains(controllers, "pids") {
		l.PidsMax = 0
	}
	if slices.Contains(controllers, "cpu") {
		l.CPUs = 0
	}
	return l
}

// openRoot opens the slice root with the controllers that Options.SessionLimits need. Where the
// default root cannot give everything asked for, the Reaper asks systemd for a delegated scope of its
// own first (see inScope) and opens the root there. Only then does it settle for less: a controller
// the host does not offer (or a root that opens only without it) is an error under ContainCgroup, and
// costs its limit, with a warning, under ContainAuto.
func (r *Reaper) openRoot() (*cgroup.Root, error) {
	if root, err := r.tryRoot(true); err == nil {
		return root, nil
	}
	if r.scopeMayHelp() {
		if err := r.inScope(); err != nil {
			r.info.NoScope = err.Error()
		}
	}
	return r.tryRoot(false)
}

// tryRoot opens the slice root with the controllers the limits need. When strict, it settles for
// nothing less and creates nothing when it fails; otherwise it drops what the host cannot give, as
// openRoot says.
func (r *Reaper) tryRoot(strict bool) (*cgroup.Root, error) {
	want := r.opts.SessionLimits
	need := limitControllers(want)
	if len(need) == 0 {
		return cgroup.OpenRoot(r.opts.Cgroup)
	}
	opts := r.opts.Cgroup
	info := cgroup.Detect(opts)
	if !info.Usable() {
		return cgroup.OpenRoot(opts) // fails, and says why
	}
	var missing []string
	for _, c := range need {
		if !slices.Contains(info.Controllers, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		why := fmt.Sprintf("the %s controller is not offered for %s (offered: %s)",
			strings.Join(missing, ", "), info.Root, listOrNone(info.Controllers))
		switch {
		case r.opts.Containment == ContainCgroup && !strict:
			return nil, &limitsError{fmt.Errorf("%w: %s", cgroup.ErrNoController, why+r.noScopeText())}
		case strict:
			return nil, fmt.Errorf("%w: %s", cgroup.ErrNoController, why)
		}
		r.dropLimits(want, why)
		want = without(want, missing)
		need = limitControllers(want)
	}
	opts.Controllers = append(slices.Clone(opts.Controllers), need...)
	root, err := cgroup.OpenRoot(opts)
	if err != nil && len(need) > 0 && r.opts.Containment != ContainCgroup && !strict {
		if root, err2 := cgroup.OpenRoot(r.opts.Cgroup); err2 == nil {
			r.dropLimits(want, err.Error())
			return root, nil
		}
	}
	if err != nil && len(need) > 0 {
		if !strict {
			err = fmt.Errorf("%w%s", err, r.noScopeText())
		}
		return nil, &limitsError{err}
	}
	r.limits = want
	r.watchHits = want != (cgroup.Limits{})
	return root, err
}

// limitsError is a failure to set up what per-session limits need, which no fallback can make up for
// under ContainCgroup.
type limitsError struct{ err error }

func (e *limitsError) Error() string { return "per-session limits: " + e.err.Error() }
func (e *limitsError) Unwrap() error { return e.err }

// dropLimits records and logs that limits asked for are not applied.
func (r *Reaper) dropLimits(l cgroup.Limits, why string) {
	dropped := limitControllers(l)
	if len(dropped) == 0 {
		return
	}
	why += r.noScopeText()
	r.info.LimitsDropped = fmt.Sprintf("%s limits not applied: %s", strings.Join(dropped, ", "), why)
	r.log.Warn("per-session limits not applied", "limits", strings.Join(dropped, ","), "reason", why)
}

// createSlice makes a session's slice below this Reaper's and writes the session limits into it; a
// slice whose limits cannot be written is removed again, and the error says why: a session that was
// to be limited does not run unlimited.
func (r *Reaper) createSlice(name string) (*cgroup.Slice, error) {
	slice, err := r.instance.Create(name)
	if err != nil || r.limits == (cgroup.Limits{}) {
		return slice, err
	}
	if err := slice.SetLimits(r.limits); err != nil {
		return nil, errors.Join(err, slice.Remove())
	}
	return slice, nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}
