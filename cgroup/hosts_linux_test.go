package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// Hosts that this machine is not, simulated with real cgroups in private mount and cgroup namespaces.

// requireUnshare skips the test without unshare(1).
func requireUnshare(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("skipped: needs unshare(1) from util-linux")
	}
}

// testCgroup creates a uniquely named cgroup below the mountpoint, removed with everything in it at
// cleanup, and returns its path and an open descriptor for SysProcAttr.CgroupFD.
func testCgroup(t *testing.T, info Info, prefix string) (string, int) {
	t.Helper()
	dir := filepath.Join(info.Mountpoint, testutil.UniqueName(prefix))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { destroy(t, dir) })
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return dir, fd
}

// inPrivateMounts returns argv that runs script with sh in new mount (and, with cgroupNS, cgroup)
// namespaces whose mounts do not propagate; the script ends with exec "$0", the test binary.
func inPrivateMounts(cgroupNS bool, script string) []string {
	argv := []string{"unshare", "--mount", "--propagation", "private"}
	if cgroupNS {
		argv = append(argv, "--cgroup")
	}
	return append(argv, "/bin/sh", "-c", script, os.Args[0])
}

// TestNamespaceShowingTheHostHierarchy: a container with a cgroup namespace of its own but the
// host's cgroup2 bind-mounted at /sys/fs/cgroup. /proc/self/cgroup reads "0::/" there while the
// mount shows the host's top: the root must still be made below the process's own cgroup, and the
// process, at the root of its namespace, moves itself into a leaf.
func TestNamespaceShowingTheHostHierarchy(t *testing.T) {
	info := requireCgroup2(t)
	requireUnshare(t)
	nsroot, fd := testCgroup(t, info, "reaper-test-hostns-")
	name := filepath.Base(nsroot)
	script := `exec "$0"`
	if info.Mountpoint != unifiedMount {
		// A bind mount, not a new mount or a remount: the superblock's options are untouched.
		script = fmt.Sprintf(`mount --bind %s %s && exec "$0"`, info.Mountpoint, unifiedMount)
	}
	res := runHelper(t, "open", nil, inPrivateMounts(true, script), &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd})
	if res.Err != "" {
		t.Fatalf("helper failed: %s (info %+v)", res.Err, res.Info)
	}
	inside := filepath.Join(unifiedMount, name)
	if res.Info.Self != "/"+name || res.Info.Root != inside+"/reaper" {
		t.Errorf("own cgroup %q, root %q; want /%s and %s/reaper (below the own cgroup, not the host's top)",
			res.Info.Self, res.Info.Root, name, inside)
	}
	if res.Info.Supervisor != inside+"/supervisor" || res.SelfAfter != "/supervisor" {
		t.Errorf("supervisor %q, own cgroup after OpenRoot %q; want %s/supervisor and /supervisor (the namespace root is delegated)",
			res.Info.Supervisor, res.SelfAfter, inside)
	}
	if res.SliceCgroup != "0::/reaper/s-1" {
		t.Errorf("child in the slice saw %q, want 0::/reaper/s-1", res.SliceCgroup)
	}
	if !exists(filepath.Join(nsroot, "reaper")) || !exists(filepath.Join(nsroot, "supervisor")) {
		t.Errorf("expected %s/reaper and %s/supervisor", nsroot, nsroot)
	}
}

// TestNoMoveOutsideADelegatedCgroup: in an ordinary cgroup (not a namespace root, not marked
// delegated, no controllers asked for) the process stays where it is.
func TestNoMoveOutsideADelegatedCgroup(t *testing.T) {
	info := requireCgroup2(t)
	dir, fd := testCgroup(t, info, "reaper-test-plain-")
	res := runHelper(t, "open", nil, []string{os.Args[0]}, &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd})
	if res.Err != "" {
		t.Fatalf("helper failed: %s", res.Err)
	}
	rel := strings.TrimPrefix(dir, info.Mountpoint)
	if res.Info.Supervisor != "" || res.SelfAfter != rel || exists(filepath.Join(dir, "supervisor")) {
		t.Errorf("moved into %q (own cgroup after: %q), want no move from %s", res.Info.Supervisor, res.SelfAfter, rel)
	}
	if res.Info.Root != dir+"/reaper" {
		t.Errorf("root %s, want %s/reaper", res.Info.Root, dir)
	}
}

// TestSharedCgroupIsLeftAlone: a process started in a cgroup that holds another program's process
// too (a client that started reaper over stdio) cannot enable controllers there; OpenRoot says so
// and leaves the cgroup as it found it: no leaf, no root, nobody moved.
func TestSharedCgroupIsLeftAlone(t *testing.T) {
	info := requireCgroup2(t)
	top, _ := readFields(filepath.Join(info.Mountpoint, "cgroup.subtree_control"))
	if len(top) == 0 {
		t.Skipf("skipped: the root cgroup of %s enables no controller for its children, and tests never change it", info.Mountpoint)
	}
	dir, fd := testCgroup(t, info, "reaper-test-shared-")
	client := exec.Command("sleep", "1000")
	client.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Process.Kill()
		client.Wait()
	})
	res := runHelper(t, "controllers", []string{"CGROUP_TEST_CONTROLLERS=" + top[0]}, []string{os.Args[0]},
		&syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd})
	if !strings.Contains(res.Err, "not ours to move") || !strings.Contains(res.Err, strconv.Itoa(client.Process.Pid)) {
		t.Errorf("OpenRoot with %s in a cgroup shared with pid %d: error %q, want one naming it as not ours to move", top[0], client.Process.Pid, res.Err)
	}
	rel := strings.TrimPrefix(dir, info.Mountpoint)
	if res.SelfAfter != rel || exists(filepath.Join(dir, "supervisor")) || exists(filepath.Join(dir, "reaper")) {
		t.Errorf("own cgroup after %q, want %s; supervisor made: %v, root made: %v", res.SelfAfter, rel,
			exists(filepath.Join(dir, "supervisor")), exists(filepath.Join(dir, "reaper")))
	}
}

// TestSystemdDelegateMark: a cgroup systemd marked with trusted.delegate (Delegate=yes) is left by
// the process for a leaf, as systemd's delegation rules ask.
func TestSystemdDelegateMark(t *testing.T) {
	info := requireCgroup2(t)
	dir, fd := testCgroup(t, info, "reaper-test-unit-")
	if err := unix.Setxattr(dir, "trusted.delegate", []byte("1"), 0); err != nil {
		t.Skipf("skipped: this kernel does not keep trusted.* attributes on cgroups: %v", err)
	}
	res := runHelper(t, "open", nil, []string{os.Args[0]}, &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd})
	if res.Err != "" {
		t.Fatalf("helper failed: %s", res.Err)
	}
	rel := strings.TrimPrefix(dir, info.Mountpoint)
	if res.Info.Supervisor != dir+"/supervisor" || res.SelfAfter != rel+"/supervisor" {
		t.Errorf("supervisor %q, own cgroup after %q; want %s/supervisor", res.Info.Supervisor, res.SelfAfter, dir)
	}
	if res.SliceCgroup != "0::"+rel+"/reaper/s-1" {
		t.Errorf("child in the slice saw %q, want 0::%s/reaper/s-1", res.SliceCgroup, rel)
	}
}

// TestNestedRootIsCreated: a root whose parents do not exist yet is made with them, and Release
// removes exactly what was made.
func TestNestedRootIsCreated(t *testing.T) {
	info := requireCgroup2(t)
	base, _ := testCgroup(t, info, "reaper-test-nested-")
	root := filepath.Join(base, "a", "b", "root")
	r, err := OpenRoot(Options{Root: root})
	if err != nil {
		t.Fatalf("OpenRoot(%s): %v", root, err)
	}
	if !exists(root) {
		t.Fatalf("%s was not created", root)
	}
	s, err := r.Create("s-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Release(); err != nil || !exists(root) {
		t.Errorf("Release with a slice in the root: %v, root exists %v; want nil and the root kept", err, exists(root))
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(base, "a")) || !exists(base) {
		t.Errorf("after Release: %s/a exists %v, %s exists %v; want only what OpenRoot made removed",
			base, exists(filepath.Join(base, "a")), base, exists(base))
	}
}

// TestNestedRootWithControllers: controllers are enabled from the nearest existing ancestor down
// through the parents made for the root. It needs a controller that the hierarchy's root already
// hands down, because the machine's root cgroup is never changed.
func TestNestedRootWithControllers(t *testing.T) {
	info := requireCgroup2(t)
	top, _ := readFields(filepath.Join(info.Mountpoint, "cgroup.subtree_control"))
	if len(top) == 0 {
		t.Skipf("skipped: the root cgroup of %s enables no controller for its children, and tests never change it", info.Mountpoint)
	}
	base, _ := testCgroup(t, info, "reaper-test-nestctl-")
	root := filepath.Join(base, "a", "root")
	r, err := OpenRoot(Options{Root: root, Controllers: top[:1]})
	if err != nil {
		t.Fatalf("OpenRoot(%s, %v): %v", root, top[:1], err)
	}
	for _, d := range []string{base, filepath.Join(base, "a"), root} {
		if got, _ := readFields(filepath.Join(d, "cgroup.subtree_control")); !slices.Contains(got, top[0]) {
			t.Errorf("%s: subtree_control %v lacks %s", d, got, top[0])
		}
	}
	s, err := r.Create("s-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readFields(filepath.Join(s.Path(), "cgroup.controllers")); !slices.Contains(got, top[0]) {
		t.Errorf("slice offers %v, want %s", got, top[0])
	}
}

// TestReleaseDefaultRoot: two instances share the default root, a child "reaper" of their own
// cgroup; whichever closes last removes it.
func TestReleaseDefaultRoot(t *testing.T) {
	info := requireCgroup2(t)
	dir, fd := testCgroup(t, info, "reaper-test-release-")
	res := runHelper(t, "release", nil, []string{os.Args[0]}, &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd})
	if res.Err != "" {
		t.Fatalf("helper failed: %s", res.Err)
	}
	want := map[string]bool{"opened": true, "first released": true, "second released": false}
	for step, w := range want {
		if res.RootExists[step] != w {
			t.Errorf("root exists after %q: %v, want %v (all: %v)", step, res.RootExists[step], w, res.RootExists)
		}
	}
	if exists(filepath.Join(dir, "reaper")) {
		t.Errorf("%s/reaper left behind", dir)
	}
}

// releaseDefault is the release helper: two Roots on the default root, the first released while
// the second has a slice in it, then the second released after removing it.
func releaseDefault() (helperResult, error) {
	res := helperResult{RootExists: map[string]bool{}}
	r1, err := OpenRoot(Options{})
	if err != nil {
		return res, err
	}
	r2, err := OpenRoot(Options{})
	if err != nil {
		return res, err
	}
	res.Info = r1.Info()
	s, err := r2.Create("r-2")
	if err != nil {
		return res, err
	}
	res.RootExists["opened"] = exists(r1.Path())
	if err := r1.Release(); err != nil {
		return res, err
	}
	res.RootExists["first released"] = exists(r1.Path())
	if err := s.Remove(); err != nil {
		return res, err
	}
	if err := r2.Release(); err != nil {
		return res, err
	}
	res.RootExists["second released"] = exists(r1.Path())
	return res, nil
}

// TestCreateWhileAnotherReleases: instances sharing a root come and go at once. Creating an
// instance's slice just as another instance removes the empty root must make the root again, never
// fail.
func TestCreateWhileAnotherReleases(t *testing.T) {
	info := requireCgroup2(t)
	base, _ := testCgroup(t, info, "reaper-test-race-")
	root := filepath.Join(base, "root")
	r, err := OpenRoot(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	// Deterministic first: the root is gone when Create runs.
	if err := r.Release(); err != nil || exists(root) {
		t.Fatalf("Release of an empty root it made: %v, exists %v", err, exists(root))
	}
	s, err := r.Create("after-release")
	if err != nil {
		t.Fatalf("Create after the root vanished: %v", err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	// Then four instances at once, each opening, creating, removing and releasing in a loop.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 40 {
				r, err := OpenRoot(Options{Root: root})
				if err != nil {
					errs <- fmt.Errorf("instance %d round %d: open: %w", i, n, err)
					return
				}
				s, err := r.Create(fmt.Sprintf("i%d-%d", i, n))
				if err != nil {
					errs <- fmt.Errorf("instance %d round %d: create: %w", i, n, err)
					return
				}
				if err := s.Remove(); err != nil {
					errs <- err
					return
				}
				if err := r.Release(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestWhatWasFound: the reason names what the host has: no cgroup filesystem, cgroup v1 only, or
// cgroup2 somewhere that is not writable, and cgroup2 at an unusual place is used when the root
// points into it.
func TestWhatWasFound(t *testing.T) {
	info := requireCgroup2(t)
	requireUnshare(t)
	m := info.Mountpoint
	t.Run("no cgroup filesystem", func(t *testing.T) {
		// A tmpfs over /sys/fs/cgroup in a private mount namespace hides every hierarchy.
		res := runHelper(t, "detect", nil, inPrivateMounts(false, `mount -t tmpfs none /sys/fs/cgroup && exec "$0"`), nil)
		if !strings.HasPrefix(res.Info.Reason, "no cgroup filesystem") || res.Err == "" {
			t.Errorf("reason %q (error %q), want it to start with \"no cgroup filesystem\"", res.Info.Reason, res.Err)
		}
	})
	t.Run("cgroup v1 only", func(t *testing.T) {
		if m != hybridMount {
			t.Skipf("skipped: needs a hybrid host with cgroup v1 beside %s (cgroup2 is at %s)", hybridMount, m)
		}
		res := runHelper(t, "detect", nil, inPrivateMounts(false, `mount -t tmpfs none `+hybridMount+` && exec "$0"`), nil)
		if !strings.HasPrefix(res.Info.Reason, "cgroup v1 only") {
			t.Errorf("reason %q, want it to start with \"cgroup v1 only\"", res.Info.Reason)
		}
	})
	t.Run("not writable", func(t *testing.T) {
		script := fmt.Sprintf(`mount --bind %[1]s %[1]s && mount -o bind,remount,ro %[1]s %[1]s && exec "$0"`, m)
		res := runHelper(t, "detect", nil, inPrivateMounts(false, script), nil)
		if want := "cgroup2 at " + m + ", not writable: "; !strings.HasPrefix(res.Info.Reason, want) || !res.EROFS {
			t.Errorf("reason %q (EROFS %v), want it to start with %q", res.Info.Reason, res.EROFS, want)
		}
	})
	t.Run("unusual mount point", func(t *testing.T) {
		at := filepath.Join(t.TempDir(), "cg")
		if err := os.Mkdir(at, 0o755); err != nil {
			t.Fatal(err)
		}
		name := testutil.UniqueName("reaper-test-unusual-")
		t.Cleanup(func() { destroy(t, filepath.Join(m, name)) })
		// cgroup2 bound at a path of no convention, and the standard places hidden.
		script := fmt.Sprintf(`mount --bind %s %s && mount -t tmpfs none /sys/fs/cgroup && exec "$0"`, m, at)
		res := runHelper(t, "detect", nil, inPrivateMounts(false, script), nil)
		if !strings.Contains(res.Info.Reason, "cgroup2 is mounted at "+at) {
			t.Errorf("default root: reason %q, want it to say cgroup2 is mounted at %s", res.Info.Reason, at)
		}
		res = runHelper(t, "detect", []string{"CGROUP_TEST_ROOT=" + filepath.Join(at, name)}, inPrivateMounts(false, script), nil)
		if res.Err != "" || res.Info.Mode != Mounted || res.Info.Mountpoint != at || !res.Created {
			t.Errorf("root below %s: mode %v at %q, created %v, error %q; want it used", at, res.Info.Mode, res.Info.Mountpoint, res.Created, res.Err)
		}
		if !exists(filepath.Join(m, name)) {
			t.Errorf("%s/%s was not created on the host's hierarchy", m, name)
		}
	})
}

func TestReadMounts(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(f, []byte(`31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
41 31 0:38 /../.. /sys/fs/cgroup/unified rw,relatime shared:9 master:2 - cgroup2 cgroup2 rw
65 44 0:38 /a\040b /tmp/with\040space rw - cgroup2 cgroup2 rw
`), 0o644)
	got, err := readMounts(f)
	want := []mountInfo{
		{id: 31, root: "/", point: "/sys/fs/cgroup", fstype: "tmpfs"},
		{id: 41, root: "/../..", point: "/sys/fs/cgroup/unified", fstype: "cgroup2"},
		{id: 65, root: "/a b", point: "/tmp/with space", fstype: "cgroup2"},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("readMounts = %+v, %v; want %+v", got, err, want)
	}
	os.WriteFile(f, []byte("garbage\n"), 0o644)
	if _, err := readMounts(f); err == nil {
		t.Error("a malformed line was accepted")
	}
	for _, tc := range []struct {
		shown    string
		up       int
		down     []string
		mountDir string
	}{
		{"/", 0, nil, "/"},
		{"/../..", 2, nil, "/../../x"},
		{"/../a", 1, []string{"a"}, "/../a/x"},
		{"/a/b", 0, []string{"a", "b"}, "/a/b/x"},
	} {
		up, down := splitShown(tc.shown)
		if up != tc.up || !slices.Equal(down, tc.down) {
			t.Errorf("splitShown(%q) = %d, %q; want %d, %q", tc.shown, up, down, tc.up, tc.down)
		}
		if got := shownRoot(mountInfo{root: tc.shown, point: "/m"}, "/m/x"); tc.shown != "/" && got != tc.mountDir {
			t.Errorf("shownRoot(%q, /m/x) = %q, want %q", tc.shown, got, tc.mountDir)
		}
	}
}
