package cgroup

import (
	"bytes"
	"path/filepath"
	"strconv"
)

// Memory reads memory.current: the bytes of memory the slice and everything below it use. ok is false
// where the file is missing (the memory controller is not enabled for the slice, or the slice is gone)
// or unreadable.
func (s *Slice) Memory() (n int64, ok bool) {
	b, err := readSmall(nil, filepath.Join(s.path, "memory.current"))
	if err != nil {
		return 0, false
	}
	n, err = strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return n, err == nil
}

// OOMKills reads oom_kill in memory.events: how many processes of the slice, or of a cgroup below it,
// the kernel's OOM killer has killed since the slice was created (the count is hierarchical). ok is
// false where the file is missing (the memory controller is not enabled for the slice, or the slice is
// gone) or holds no such key (kernels before 4.13).
func (s *Slice) OOMKills() (n int64, ok bool) {
	b, err := readSmall(nil, filepath.Join(s.path, "memory.events"))
	if err != nil {
		return 0, false
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if v, found := bytes.CutPrefix(line, []byte("oom_kill ")); found {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
