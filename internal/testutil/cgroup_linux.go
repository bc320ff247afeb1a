package testutil

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// CgroupRoot returns a unique, not yet created directory directly below the cgroup2 mountpoint, for a
// test's cgroup root, and removes it at cleanup (RemoveCgroup); it skips the test where cgroup
// containment is impossible (not root, no cgroup2 mount, a read-only one). Whatever the test makes
// below it must be gone by then: what is not fails the test, and is removed all the same. It finds the mount in /proc/self/mountinfo itself: package cgroup's own tests use
// this package.
func CgroupRoot(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: cgroup containment needs root to create cgroups (run the tests as root)")
	}
	mount := cgroup2Mount()
	if mount == "" {
		t.Skip("skipped: cgroup containment needs a cgroup2 hierarchy, and none is mounted")
	}
	if err := unix.Access(mount, unix.W_OK); err != nil {
		t.Skipf("skipped: cgroup containment needs a writable cgroup2 hierarchy: %s: %v", mount, err)
	}
	root := filepath.Join(mount, UniqueName("reaper-test-"))
	t.Cleanup(func() { RemoveCgroup(t, root) })
	return root
}

// cgroup2Mount returns the first cgroup2 mountpoint of /proc/self/mountinfo, or "".
func cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if ok && strings.HasPrefix(post, "cgroup2 ") && len(fields) >= 5 {
			return fields[4]
		}
	}
	return ""
}

// Zoo returns shell code that starts one of every process that escapes a process group or its
// parent (setsid, a double fork, nohup, one ignoring SIGTERM, one that stops itself, one that keeps
// forking), and returns once each has written its pid into dir/pids, printing them.
func Zoo(dir string) string {
	f := filepath.Join(dir, "pids")
	return fmt.Sprintf(`: > %[1]s
setsid sh -c 'echo $$ >> %[1]s; exec sleep 1000' &
sh -c 'sh -c "echo \$\$ >> %[1]s; exec sleep 1000" &' &
nohup sh -c 'echo $$ >> %[1]s; exec sleep 1000' >/dev/null 2>&1 &
sh -c 'trap "" TERM; echo $$ >> %[1]s; exec sleep 1000' &
sh -c 'echo $$ >> %[1]s; kill -STOP $$; exec sleep 1000' &
sh -c 'echo $$ >> %[1]s; while :; do sleep 1000 & sleep 0.02; done' &
`, f) + AwaitLines(f, 6)
}

// RawKill is the floor a cgroup kill is measured against: one write to dir's cgroup.kill, then polls
// on its cgroup.events until it reads "populated 0".
func RawKill(t testing.TB, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(filepath.Join(dir, "cgroup.events"), unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 64)
	for {
		n, _ := unix.Pread(fd, buf, 0)
		if string(buf[:n]) == "populated 0\nfrozen 0\n" {
			return
		}
		unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}, 10000)
	}
}
