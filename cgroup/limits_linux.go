package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup2"
)

// ErrNoController is wrapped by [Slice.SetLimits] when a limit needs a controller the slice's parent
// does not offer.
var ErrNoController = errors.New("controller not available")

// Limits are resource limits for one slice. The zero value of a field leaves that limit unset.
type Limits struct {
	// MemoryMax is memory.max in bytes (needs the memory controller).
	MemoryMax int64
	// PidsMax is pids.max, the most processes and threads (needs the pids controller).
	PidsMax int64
	// CPUs is the CPU bandwidth in CPUs, e.g. 1.5, written as cpu.max with a 100 ms period (needs the
	// cpu controller).
	CPUs float64
}

// cpuPeriod is the kernel's default cpu.max period, in microseconds.
const cpuPeriod = 100000

// SetLimits writes the limits into the slice's files. It first checks that the slice's parent offers
// every controller the limits need, and names the missing ones in its error (wrapping
// ErrNoController), so that nothing is half-applied. Controllers are offered to slices when the root
// is opened with [Options.Controllers].
func (s *Slice) SetLimits(l Limits) error {
	return setLimits(s.mount, s.path, l)
}

func setLimits(mount, path string, l Limits) error {
	if l.MemoryMax < 0 || l.PidsMax < 0 || l.CPUs < 0 {
		return fmt.Errorf("limits on %s: negative value in %+v", path, l)
	}
	var res cgroup2.Resources
	var need []string
	if l.MemoryMax > 0 {
		res.Memory = &cgroup2.Memory{Max: &l.MemoryMax}
		need = append(need, "memory")
	}
	if l.PidsMax > 0 {
		res.Pids = &cgroup2.Pids{Max: l.PidsMax}
		need = append(need, "pids")
	}
	if l.CPUs > 0 {
		quota := int64(l.CPUs * cpuPeriod)
		period := uint64(cpuPeriod)
		res.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)}
		need = append(need, "cpu")
	}
	if len(need) == 0 {
		return nil
	}
	offered, err := readFields(filepath.Join(path, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("limits on %s: %w", path, err)
	}
	var missing []string
	for _, c := range need {
		if !slices.Contains(offered, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("limits on %s: %w: %s not enabled in %s (offered: %s)",
			path, ErrNoController, strings.Join(missing, ", "), filepath.Dir(path), listOrNone(offered))
	}
	rel, err := filepath.Rel(mount, path)
	if err != nil {
		return fmt.Errorf("limits on %s: %w", path, err)
	}
	m, err := cgroup2.Load("/"+rel, cgroup2.WithMountpoint(mount))
	if err != nil {
		return fmt.Errorf("limits on %s: %w", path, err)
	}
	if err := m.Update(&res); err != nil {
		return fmt.Errorf("limits on %s: %w", path, err)
	}
	return nil
}
