package cgroup

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Where cgroup filesystems are mounted, from /proc/self/mountinfo: unlike the standard paths alone
// (containerd's cgroups.Mode), field 4 of a mount's line says which cgroup its top directory is,
// relative to the root of this process's cgroup namespace (see the package doc).

// mountInfo is one line of /proc/self/mountinfo.
type mountInfo struct {
	id     int
	root   string // the directory of the filesystem the mount shows at point (field 4)
	point  string // where it is mounted (field 5)
	fstype string
}

// readMounts parses a mountinfo file.
func readMounts(file string) ([]mountInfo, error) { return readParsed(nil, file, parseMounts) }

// parseMounts parses the contents of a mountinfo file.
func parseMounts(b []byte) ([]mountInfo, error) {
	var out []mountInfo
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		// id parent major:minor root point options [optional fields...] - fstype source super-options,
		// separated by single spaces: the kernel escapes space, tab, newline and backslash in paths,
		// but a path may hold any other byte, \r and the like included.
		f := strings.Split(string(line), " ")
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 6 || sep < 0 || sep+1 >= len(f) {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		out = append(out, mountInfo{id: id, root: unescapeMount(f[3]), point: unescapeMount(f[4]), fstype: f[sep+1]})
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountID returns the id of the mount path resolves into (statx STATX_MNT_ID, Linux 5.8 and later),
// or false where the kernel does not say.
func mountID(path string) (int, bool) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_MNT_ID, &stx); err != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, false
	}
	return int(stx.Mnt_id), true
}

// mountOf returns the mount that path (which must exist) resolves into. Mounts stacked on one another
// or hidden by a later mount on an ancestor are told apart by mount id; on kernels without
// STATX_MNT_ID the last listed mount whose point is path or its closest ancestor is taken.
func mountOf(mounts []mountInfo, path string) (mountInfo, bool) {
	if id, ok := mountID(path); ok {
		for _, m := range mounts {
			if m.id == id {
				return m, true
			}
		}
	}
	var best mountInfo
	found := false
	for _, m := range mounts {
		if within(m.point, path) && (!found || len(m.point) >= len(best.point)) {
			best, found = m, true
		}
	}
	return best, found
}

// visible reports whether m can be reached at its mount point, that is, no later mount hides it
// (a mount on an ancestor hides it even where the path no longer exists).
func visible(m mountInfo) bool {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, m.point, 0, unix.STATX_MNT_ID, &stx); err != nil {
		return false
	}
	return stx.Mask&unix.STATX_MNT_ID == 0 || int(stx.Mnt_id) == m.id
}

// within reports whether path is dir or lies below it; both must be clean and absolute.
func within(dir, path string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// shownRoot returns the cgroup that the directory dir on mount m is, relative to this process's
// cgroup namespace: it starts with "/.." when dir is above the namespace's root. (filepath.Join and
// Clean would drop those leading "..".)
func shownRoot(m mountInfo, dir string) string {
	rel, _ := filepath.Rel(m.point, dir)
	switch {
	case rel == ".":
		return m.root
	case m.root == "/":
		return "/" + rel
	}
	return m.root + "/" + rel
}
