package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// resolveSelf returns this process's cgroup relative to the cgroup2 mount at mountpoint. self is the
// cgroup as /proc/self/cgroup names it, relative to the root of the process's cgroup namespace; root
// is the mount's root (see mountRoot), relative to that same namespace root. Three cases:
//   - root "/": the mount shows the namespace's root at its top (no cgroup namespace, or a mount made
//     inside it). self is the answer.
//   - root "/a/b": the mount shows a cgroup below the namespace's root; self must be in it.
//   - root "/..", "/../..": the mount was made outside the namespace and shows cgroups above its root,
//     as when a container with a private cgroup namespace bind-mounts the host's hierarchy. The
//     kernel does not name the cgroups in between, so the namespace's root is found among the
//     directories that many levels below the mountpoint: the one whose descendant self lists pid, this
//     process, in its cgroup.procs. A process is in exactly one cgroup, so at most one matches.
//
// Taking self against such a mount as it is would name a cgroup outside the namespace (the host's
// root for "0::/"), and slices would be made there.
func resolveSelf(mountpoint, root, self string, pid int) (string, error) {
	if root == "/" {
		return self, nil
	}
	up := strings.Split(strings.TrimPrefix(root, "/"), "/")
	if up[0] != ".." {
		if self == root {
			return "/", nil
		}
		if rest, ok := strings.CutPrefix(self, root+"/"); ok {
			return "/" + rest, nil
		}
		return "", fmt.Errorf("own cgroup %s is not visible under %s, which shows %s", self, mountpoint, root)
	}
	if slices.ContainsFunc(up, func(c string) bool { return c != ".." }) {
		return "", fmt.Errorf("own cgroup %s is not visible under %s, which shows %s, beside the cgroup namespace's root", self, mountpoint, root)
	}
	var found []string
	for _, dir := range dirsAtDepth(mountpoint, len(up)) {
		if listsPid(filepath.Join(dir, self, "cgroup.procs"), pid) {
			found = append(found, dir)
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("own cgroup %s (in a cgroup namespace whose root is %d levels below the top of %s) found in %d places there: %v",
			self, len(up), mountpoint, len(found), found)
	}
	rel, err := filepath.Rel(mountpoint, found[0])
	if err != nil {
		return "", err
	}
	return filepath.Join("/", rel, self), nil
}

// dirsAtDepth returns the directories depth levels below dir.
func dirsAtDepth(dir string, depth int) []string {
	if depth == 0 {
		return []string{dir}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, dirsAtDepth(filepath.Join(dir, e.Name()), depth-1)...)
		}
	}
	return out
}

// listsPid reports whether the cgroup.procs file lists pid.
func listsPid(file string, pid int) bool {
	pids, err := readPids(file, nil)
	return err == nil && slices.Contains(pids, pid)
}

// mountRoot returns the root of the cgroup2 mount at mountpoint, from mountinfo (/proc/self/mountinfo):
// the cgroup the mount shows at its top, relative to the root of this process's cgroup namespace.
// Of several mounts at mountpoint the last one, on top, counts.
func mountRoot(mountinfo, mountpoint string) (string, error) {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", mountinfo, err)
	}
	root := ""
	for line := range strings.Lines(string(b)) {
		fields, fs, ok := strings.Cut(line, " - ")
		f, fsFields := strings.Fields(fields), strings.Fields(fs)
		if !ok || len(f) < 5 || len(fsFields) == 0 || fsFields[0] != "cgroup2" {
			continue
		}
		if unescapeMountinfo(f[4]) == mountpoint {
			root = unescapeMountinfo(f[3])
		}
	}
	if root == "" {
		return "", fmt.Errorf("no cgroup2 mount at %s in %s", mountpoint, mountinfo)
	}
	return root, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a path in mountinfo.
func unescapeMountinfo(s string) string {
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
