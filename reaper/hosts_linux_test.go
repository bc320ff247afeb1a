package reaper

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/testutil"
)

// Hosts this machine is not, simulated with real cgroups in private mount namespaces, and roots that
// cannot be used.

// readOnlyCgroupfs returns argv that runs the test binary in a private mount namespace where the
// cgroup2 mount is a read-only bind mount, as a non-privileged pod sees its cgroupfs; the machine's
// cgroup2 stays writable.
func readOnlyCgroupfs() []string {
	m := cgroup.Detect(cgroup.Options{}).Mountpoint
	script := fmt.Sprintf(`mount --bind %[1]s %[1]s && mount -o bind,remount,ro %[1]s %[1]s && exec "$0"`, m)
	return []string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script}
}

func TestReadOnlyCgroupfsFallsBackToProcessContainment(t *testing.T) {
	own := testutil.CgroupRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("skipped: needs unshare(1) from util-linux")
	}
	// The helper starts in a cgroup of its own, so that its default root is own/reaper.
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(own, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := testutil.Helper("auto")
	argv := append(readOnlyCgroupfs(), os.Args[0])
	cmd.Path, _ = exec.LookPath(argv[0])
	cmd.Args = argv
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	var res helperResult
	testutil.RunHelper(t, cmd, &res)
	if res.Err != "" {
		t.Fatalf("helper: %s", res.Err)
	}
	if res.Mode != "process" || !strings.Contains(res.Containment, "read-only") {
		t.Errorf("containment %q, want process containment that says the cgroupfs is read-only", res.Containment)
	}
	if len(res.Survivors) != 0 {
		t.Errorf("survivors after Close: %v (%s)", res.Survivors, res.Report)
	}
	if _, err := os.Stat(filepath.Join(own, "reaper")); !os.IsNotExist(err) {
		t.Errorf("the read-only run created %s/reaper", own)
	}
}

// TestExplicitRootThatFailsIsAnError: a root that was asked for and cannot be used is an error in
// every mode, never a silent fallback to process containment.
func TestExplicitRootThatFailsIsAnError(t *testing.T) {
	base := testutil.CgroupRoot(t)
	m := cgroup.Detect(cgroup.Options{}).Mountpoint
	name := filepath.Base(base)
	bad := map[string]string{
		"relative":      "relative/" + name,
		"unclean":       m + "/x/../" + name,
		"mount root":    m,
		"not cgroupfs":  filepath.Join(t.TempDir(), name),
		"bad name":      m + "/" + name + "/cgroup.procs",
		"below a file":  m + "/cgroup.procs/" + name,
		"missing mount": "/nonexistent-" + name + "/x",
		"cgroup v1":     "",
	}
	if v1 := cgroupV1Mount(t); v1 != "" {
		bad["cgroup v1"] = filepath.Join(v1, name) // never created: detection refuses it first
	} else {
		delete(bad, "cgroup v1")
	}
	for what, root := range bad {
		for _, mode := range []Containment{ContainAuto, ContainCgroup, ContainProcess} {
			r, err := New(Options{Containment: mode, Cgroup: cgroup.Options{Root: root}, StateDir: t.TempDir()})
			if err == nil {
				r.Close(context.Background())
				t.Errorf("%s root %q under %v: New succeeded with %v", what, root, mode, r.Containment())
				continue
			}
			if !strings.Contains(err.Error(), "cgroup root "+root+" was asked for") {
				t.Errorf("%s root %q under %v: error %q does not name the root", what, root, mode, err)
			}
		}
		if _, err := os.Stat(root); filepath.IsAbs(root) && root != m && err == nil {
			t.Errorf("%s root %s was created", what, root)
		}
	}
	// Not writable: a read-only cgroupfs.
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("skipped: the read-only case needs unshare(1) from util-linux")
	}
	res := runHelper(t, "auto", []string{"RTEST_ROOT=" + base}, readOnlyCgroupfs()...)
	if !strings.Contains(res.Err, "cgroup root "+base+" was asked for") || !strings.Contains(res.Err, "not writable") {
		t.Errorf("read-only explicit root under auto: error %q, want one naming the root and saying it is not writable (containment %q)",
			res.Err, res.Containment)
	}
}

// cgroupV1Mount returns the mount point of a cgroup v1 hierarchy, or "" when there is none.
func cgroupV1Mount(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 8 && strings.Contains(line, " - cgroup ") {
			return f[4]
		}
	}
	return ""
}

// TestCloseRemovesTheRootItMade: the root a Reaper made goes when it closes; one that was there
// before is the operator's and stays.
func TestCloseRemovesTheRootItMade(t *testing.T) {
	for _, existed := range []bool{false, true} {
		root := testutil.CgroupRoot(t)
		if existed {
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		r, err := New(Options{Containment: ContainCgroup, Cgroup: cgroup.Options{Root: filepath.Join(root, "nested")}, StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		s := newTestSession(t, r, SessionOptions{})
		run(t, s, "true")
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(root); os.IsNotExist(err) == existed {
			t.Errorf("root existed before: %v; exists after Close: %v", existed, err == nil)
		}
	}
}
