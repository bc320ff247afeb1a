package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup2"
)

// ErrNoController is wrapped by [Slice.SetLimits] when a limit needs a controller the slice's parent
// does not offer.
var ErrNoController = errors.New("controller not available")

// Limits are resource limits for one slice. The zero value of a field leaves that limit unset.
type Limits struct {
	// MemoryMax is memory.max in bytes (needs the memory controller). Where the kernel accounts swap
	// (memory.swap.max exists), memory.swap.max is set to 0 with it: on a host with swap, a slice at
	// its memory.max would otherwise go on in swap, bounded by nothing.
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
	if l.MemoryMax > 0 {
		res.Memory = &cgroup2.Memory{Max: &l.MemoryMax}
		if exists(filepath.Join(path, "memory.swap.max")) {
			res.Memory.Swap = new(int64) // 0: no swap
		}
	}
	if l.PidsMax > 0 {
		res.Pids = &cgroup2.Pids{Max: l.PidsMax}
	}
	if l.CPUs > 0 {
		quota, period := int64(l.CPUs*cpuPeriod), uint64(cpuPeriod)
		res.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)}
	}
	need := res.EnabledControllers()
	if len(need) == 0 {
		return nil
	}
	offered, err := readFields(filepath.Join(path, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("limits on %s: %w", path, err)
	}
	if lack := missing(need, offered); len(lack) > 0 {
		return fmt.Errorf("limits on %s: %w: %s not enabled in %s (offered: %s)",
			path, ErrNoController, strings.Join(lack, ", "), filepath.Dir(path), listOrNone(offered))
	}
	m, err := manager(mount, path)
	if err != nil {
		return fmt.Errorf("limits on %s: %w", path, err)
	}
	if err := m.Update(&res); err != nil {
		return fmt.Errorf("set limits: %w", err) // a *PathError: it names the file
	}
	return nil
}

// manager returns containerd's manager of the cgroup at path, on the cgroup2 hierarchy mounted at
// mount. Always with the mountpoint: cgroup2.Load without it silently takes /sys/fs/cgroup, which on
// a hybrid host is the v1 hierarchies' tmpfs.
func manager(mount, path string) (*cgroup2.Manager, error) {
	if mount == "" {
		return nil, fmt.Errorf("cgroup %s: opened without its mountpoint", path)
	}
	rel, err := filepath.Rel(mount, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("cgroup %s: not below its mountpoint %s", path, mount)
	}
	return cgroup2.Load(filepath.Join("/", rel), cgroup2.WithMountpoint(mount))
}
