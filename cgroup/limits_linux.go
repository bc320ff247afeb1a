package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	return setLimits(s.path, l)
}

// limitFile is one interface file SetLimits writes, and the controller that provides it.
type limitFile struct{ controller, name, value string }

func setLimits(path string, l Limits) error {
	if l.MemoryMax < 0 || l.PidsMax < 0 || l.CPUs < 0 {
		return fmt.Errorf("limits on %s: negative value in %+v", path, l)
	}
	var files []limitFile
	if l.MemoryMax > 0 {
		files = append(files, limitFile{"memory", "memory.max", strconv.FormatInt(l.MemoryMax, 10)})
	}
	if l.PidsMax > 0 {
		files = append(files, limitFile{"pids", "pids.max", strconv.FormatInt(l.PidsMax, 10)})
	}
	if l.CPUs > 0 {
		quota := int64(l.CPUs * cpuPeriod)
		files = append(files, limitFile{"cpu", "cpu.max", strconv.FormatInt(quota, 10) + " " + strconv.Itoa(cpuPeriod)})
	}
	if len(files) == 0 {
		return nil
	}
	offered, err := readFields(filepath.Join(path, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("limits on %s: %w", path, err)
	}
	var missing []string
	for _, f := range files {
		if !slices.Contains(offered, f.controller) {
			missing = append(missing, f.controller)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("limits on %s: %w: %s not enabled in %s (offered: %s)",
			path, ErrNoController, strings.Join(missing, ", "), filepath.Dir(path), listOrNone(offered))
	}
	for _, f := range files {
		if err := writeFile(nil, path, f.name, f.value); err != nil {
			return fmt.Errorf("set limits: %w", err) // the error names the file
		}
	}
	return nil
}
