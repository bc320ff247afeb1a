package cgroup

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Where this process's own cgroup is: /proc/self/cgroup names it relative to the process's cgroup
// namespace, and mountinfo says what part of the hierarchy a mount shows.

// ownCgroup returns the cgroup2 path ("0::<path>") from a /proc/<pid>/cgroup file.
func ownCgroup(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	return parseOwnCgroup(b, file)
}

// parseOwnCgroup returns the cgroup2 path from the contents of a /proc/<pid>/cgroup file.
func parseOwnCgroup(b []byte, file string) (string, error) {
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if p, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			s := string(p)
			if strings.HasSuffix(s, " (deleted)") || !strings.HasPrefix(s, "/") {
				return "", fmt.Errorf("own cgroup %q in %s is unusable", s, file)
			}
			return s, nil
		}
	}
	return "", fmt.Errorf("no cgroup2 entry (0::) in %s", file)
}

// resolveSelf finds this process's own cgroup in the hierarchy mounted at mountpoint and returns it
// relative to the mountpoint. self is the own cgroup from /proc/self/cgroup and shown the cgroup the
// mountpoint's directory is, from mountinfo; both are relative to this process's cgroup namespace's
// root, so shown starts with "/.." when the mount shows more than the namespace: the host's
// hierarchy, bind-mounted into a container that has a cgroup namespace of its own. Joining self to
// such a mountpoint would name a cgroup of the host, outside the process's own.
func resolveSelf(mountpoint, shown, self string) (string, error) {
	up, down := splitShown(shown)
	selfParts := parts(self)
	if up == 0 {
		// The mount shows the namespace's root or a cgroup below it.
		if len(down) > len(selfParts) || !slices.Equal(down, selfParts[:len(down)]) {
			return "", fmt.Errorf("own cgroup %s lies outside what %s shows (%s)", self, mountpoint, shown)
		}
		rel := "/" + strings.Join(selfParts[len(down):], "/")
		if !exists(filepath.Join(mountpoint, rel)) {
			return "", fmt.Errorf("own cgroup %s is not visible under %s", self, mountpoint)
		}
		return rel, nil
	}
	// The mount shows a cgroup up levels above the namespace's root. No file names the levels in
	// between: look for this process in the cgroups at the depth where the namespace's root must be.
	var candidates []string
	if len(down) > up {
		// The mount shows a cgroup below the namespace root, reached from an ancestor: what is
		// left of down after the up levels must lead to self.
		rest := down[up:]
		if len(rest) > len(selfParts) || !slices.Equal(rest, selfParts[:len(rest)]) {
			return "", fmt.Errorf("own cgroup %s lies outside what %s shows (%s)", self, mountpoint, shown)
		}
		candidates = []string{filepath.Join(mountpoint, strings.Join(selfParts[len(rest):], "/"))}
	} else {
		nsRoots, err := dirsAtDepth(mountpoint, up-len(down))
		if err != nil {
			return "", err
		}
		for _, d := range nsRoots {
			candidates = append(candidates, filepath.Join(d, self))
		}
	}
	pid := os.Getpid()
	for _, c := range candidates {
		if pids, _ := readPids(nil, filepath.Join(c, "cgroup.procs"), nil); slices.Contains(pids, pid) {
			rel, _ := filepath.Rel(mountpoint, c)
			return filepath.Join("/", rel), nil
		}
	}
	return "", fmt.Errorf("own cgroup %s (relative to this process's cgroup namespace) not found under %s, which shows %s",
		self, mountpoint, shown)
}

// splitShown splits a mount's root as mountinfo shows it ("/../../a/b") into the number of leading
// ".." and the names after them.
func splitShown(shown string) (up int, down []string) {
	ps := parts(shown)
	for up < len(ps) && ps[up] == ".." {
		up++
	}
	return up, ps[up:]
}

// parts splits an absolute path into its names ("/" has none).
func parts(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

// dirsAtDepth lists the cgroups depth levels below dir.
func dirsAtDepth(dir string, depth int) ([]string, error) {
	if depth == 0 {
		return []string{dir}, nil
	}
	children, err := childDirs(nil, dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range children {
		sub, err := dirsAtDepth(filepath.Join(dir, c), depth-1)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}
