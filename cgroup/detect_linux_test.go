package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// Helper processes: tests re-run this test binary in another mount namespace, cgroup namespace or as
// another user (testutil.Helper). The helper prints a JSON helperResult.
func TestMain(m *testing.M) { testutil.Main(m, helpers) }

type helperResult struct {
	Info          Info
	Err           string
	EROFS, EACCES bool
	Created       bool     // whether the requested root exists afterwards
	SelfAfter     string   // own cgroup after OpenRoot
	SliceCgroup   string   // cgroup a child spawned into a slice reported
	Emptied       bool     // the slice emptied after cgroup.kill
	Left          []string // slices left under the root
	// RootExists says, after each step of the release helper, whether the root existed.
	RootExists map[string]bool
}

// reply prints res, with err in it, as the helper's result.
func reply(res helperResult, err error) int {
	if err != nil {
		res.Err = err.Error()
		res.EROFS, res.EACCES = errors.Is(err, unix.EROFS), errors.Is(err, unix.EACCES)
	}
	return testutil.Reply(res)
}

var helpers = map[string]func() int{
	// detect: Detect and OpenRoot with the root named by CGROUP_TEST_ROOT.
	"detect": func() int {
		opts := Options{Root: os.Getenv("CGROUP_TEST_ROOT")}
		res := helperResult{Info: Detect(opts)}
		_, err := OpenRoot(opts)
		res.Created = exists(opts.Root)
		return reply(res, err)
	},
	// delegated: inside a cgroup namespace, open the default root as a delegated supervisor, then
	// run a process in a slice and kill it.
	"delegated": func() int { return reply(openAndRun(Options{Delegated: true})) },
	// open: the same with the zero Options: whatever OpenRoot decides by itself.
	"open": func() int { return reply(openAndRun(Options{})) },
	// controllers: open the default root with the controllers CGROUP_TEST_CONTROLLERS names.
	"controllers": func() int {
		return reply(openAndRun(Options{Controllers: strings.Fields(os.Getenv("CGROUP_TEST_CONTROLLERS"))}))
	},
	// release: two instances share the default root; see TestReleaseDefaultRoot.
	"release": func() int { return reply(releaseDefault()) },
}

// openAndRun opens a root with opts, runs a process in a slice, kills it and removes the slice.
func openAndRun(opts Options) (helperResult, error) {
	var res helperResult
	r, err := OpenRoot(opts)
	if err != nil {
		res.Info = Detect(opts)
		res.SelfAfter, _ = ownCgroup("/proc/self/cgroup")
		return res, err
	}
	res.Info = r.Info()
	res.SelfAfter, _ = ownCgroup("/proc/self/cgroup")
	s, err := r.Create("s-1")
	if err != nil {
		return res, err
	}
	f, err := s.OpenFD()
	if err != nil {
		return res, err
	}
	defer f.Close()
	cmd := exec.Command("/bin/sh", "-c", "grep '^0::' /proc/self/cgroup; exec sleep 1000")
	out, _ := cmd.StdoutPipe()
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	line := make([]byte, 256)
	n, _ := out.Read(line)
	res.SliceCgroup = strings.TrimSpace(string(line[:n]))
	if err := s.Kill(); err != nil {
		return res, err
	}
	res.Emptied, err = s.WaitEmpty(context.Background(), time.Now().Add(testutil.Slow(10*time.Second)))
	cmd.Wait()
	if err != nil {
		return res, err
	}
	if err := s.Remove(); err != nil {
		return res, err
	}
	res.Left, err = r.Slices()
	return res, err
}

// runHelper runs the named helper through argv (which ends in the test binary) and decodes its result.
func runHelper(t *testing.T, name string, env []string, argv []string, attr *syscall.SysProcAttr) helperResult {
	t.Helper()
	cmd := testutil.Helper(name, env...)
	cmd.Path, cmd.Args = argv[0], argv
	if lp, err := exec.LookPath(argv[0]); err == nil {
		cmd.Path = lp
	}
	cmd.SysProcAttr = attr
	var res helperResult
	testutil.RunHelper(t, cmd, &res)
	return res
}

func TestDetectHere(t *testing.T) {
	info := Detect(Options{})
	t.Logf("detected: %s", info)
	if info.Mode == Unavailable {
		if info.Reason == "" {
			t.Error("unavailable without a reason")
		}
		return
	}
	if info.Mountpoint == "" || info.Root == "" || info.Self == "" {
		t.Errorf("incomplete info: %+v", info)
	}
	if want := filepath.Join(info.Mountpoint, info.Self, "reaper"); info.Root != want {
		t.Errorf("default root %s, want %s (a child of our own cgroup)", info.Root, want)
	}
	if s := info.String(); !strings.Contains(s, info.Root) || !strings.Contains(s, "kill via") {
		t.Errorf("String() = %q lacks the root or the kill method", s)
	}
	if os.Geteuid() == 0 && info.Usable() && info.Kill == KillSignal {
		t.Logf("neither cgroup.kill nor the freezer here: %v", info.Kill)
	}
}

// TestTopControllers: the controllers detected for the mount's top are its cgroup.controllers, and
// hold every controller offered for the root (a cgroup has none its parent lacks).
func TestTopControllers(t *testing.T) {
	info := requireCgroup2(t)
	b, err := os.ReadFile(filepath.Join(info.Mountpoint, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Fields(string(b)); !slices.Equal(info.TopControllers, want) {
		t.Errorf("TopControllers = %v, want %v", info.TopControllers, want)
	}
	for _, c := range info.Controllers {
		if !slices.Contains(info.TopControllers, c) {
			t.Errorf("%s is offered for %s but not by the mount's top (%v)", c, info.Root, info.TopControllers)
		}
	}
}

func TestOwnCgroupParsing(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, want, err string }{
		{"12:pids:/a\n0::/user.slice/x.scope\n", "/user.slice/x.scope", ""},
		{"0::/\n", "/", ""},
		{"4:memory:/a\n1:cpu:/\n", "", "no cgroup2 entry"},
		{"0::/gone (deleted)\n", "", "unusable"},
	} {
		f := filepath.Join(dir, "cgroup")
		os.WriteFile(f, []byte(tc.content), 0o644)
		got, err := ownCgroup(f)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ownCgroup(%q) = %q, %v; want %q, error containing %q", tc.content, got, err, tc.want, tc.err)
		}
	}
}

func TestReadOnlyCgroupfsIsDetected(t *testing.T) {
	info := requireCgroup2(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("skipped: needs unshare(1) from util-linux")
	}
	root := filepath.Join(info.Mountpoint, testutil.UniqueName("reaper-test-ro-"))
	t.Cleanup(func() { destroy(t, root) })
	// A bind mount remounted read-only in a private mount namespace: the machine's cgroup2 stays
	// writable (remounting the cgroup2 superblock itself would make it read-only everywhere).
	m := info.Mountpoint
	script := fmt.Sprintf(`mount --bind %[1]s %[1]s && mount -o bind,remount,ro %[1]s %[1]s && exec "$0"`, m)
	res := runHelper(t, "detect", []string{"CGROUP_TEST_ROOT=" + root},
		[]string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, os.Args[0]}, nil)
	if res.Info.Writable || res.Info.Usable() {
		t.Errorf("read-only cgroupfs reported writable: %+v", res.Info)
	}
	if !strings.Contains(res.Info.Reason, "read-only") {
		t.Errorf("reason %q should say read-only", res.Info.Reason)
	}
	if !res.EROFS {
		t.Errorf("OpenRoot error %q does not wrap EROFS", res.Err)
	}
	if res.Created {
		t.Error("the root was created on a read-only cgroupfs")
	}
	// Outside the namespace nothing changed.
	if !Detect(Options{}).Writable {
		t.Fatal("the machine's cgroup2 became read-only: the test touched the superblock")
	}
}

func TestUnprivilegedIsDetected(t *testing.T) {
	info := requireCgroup2(t)
	// nobody must be able to run the test binary: copy it into a world-readable directory.
	dir, err := os.MkdirTemp("", "reaper-test-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "cgroup.test")
	copyFile(t, os.Args[0], bin)
	root := filepath.Join(info.Mountpoint, testutil.UniqueName("reaper-test-user-"))
	t.Cleanup(func() { destroy(t, root) })
	res := runHelper(t, "detect", []string{"CGROUP_TEST_ROOT=" + root}, []string{bin},
		&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}})
	if res.Info.Writable {
		t.Errorf("unprivileged user reported writable: %+v", res.Info)
	}
	if !res.EACCES || !strings.Contains(res.Info.Reason, "not writable") {
		t.Errorf("want EACCES and a reason saying not writable; got %q / %q", res.Err, res.Info.Reason)
	}
	if res.Created {
		t.Error("root created by an unprivileged user")
	}
}

func TestCgroupNamespaceSelfMove(t *testing.T) {
	info := requireCgroup2(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("skipped: needs unshare(1) from util-linux")
	}
	// The namespace's root is a fresh cgroup; the helper starts in it and unshares from there.
	nsroot := filepath.Join(info.Mountpoint, testutil.UniqueName("reaper-test-ns-"))
	if err := os.Mkdir(nsroot, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { destroy(t, nsroot) })
	fd, err := unix.Open(nsroot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// In the new mount namespace a fresh cgroup2 mount at /sys/fs/cgroup shows the namespace's view,
	// as a container with a cgroup namespace on a unified host sees it. It is a new mount, not a
	// remount: the superblock's options are untouched. A tmpfs goes first: where /sys/fs/cgroup is
	// already cgroup2's mount (every unified host), the kernel refuses to stack the same superblock
	// on it again (EBUSY).
	script := `mount -t tmpfs none /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup && exec "$0"`
	res := runHelper(t, "delegated", nil,
		[]string{"unshare", "--cgroup", "--mount", "--propagation", "private", "/bin/sh", "-c", script, os.Args[0]},
		&syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd})
	if res.Err != "" {
		t.Fatalf("helper failed: %s (info %+v)", res.Err, res.Info)
	}
	if res.Info.Self != "/" || res.Info.Mode != Unified {
		t.Errorf("inside the namespace: mode %v, own cgroup %q; want unified, /", res.Info.Mode, res.Info.Self)
	}
	if res.SelfAfter != "/supervisor" {
		t.Errorf("after OpenRoot own cgroup = %q, want /supervisor (moved into a leaf)", res.SelfAfter)
	}
	if res.SliceCgroup != "0::/reaper/s-1" {
		t.Errorf("child in the slice saw %q, want 0::/reaper/s-1", res.SliceCgroup)
	}
	if !res.Emptied || len(res.Left) != 0 {
		t.Errorf("kill in the namespace: emptied %v, slices left %v", res.Emptied, res.Left)
	}
	// Seen from outside, the layout is below the namespace's root.
	if !exists(filepath.Join(nsroot, "supervisor")) || !exists(filepath.Join(nsroot, "reaper")) {
		t.Errorf("expected %s/supervisor and %s/reaper", nsroot, nsroot)
	}
}

func TestDelegationNeverTouchesTheTrueRoot(t *testing.T) {
	info := requireCgroup2(t)
	if !isTrueRoot(info.Mountpoint) {
		t.Skip("skipped: this process does not see the machine's true root cgroup")
	}
	before, _ := os.ReadFile(filepath.Join(info.Mountpoint, "cgroup.subtree_control"))
	root := filepath.Join(info.Mountpoint, testutil.UniqueName("reaper-test-"))
	t.Cleanup(func() { destroy(t, root) })
	// A controller the root offers and does not enable for its children yet: asking for it would
	// mean enabling it on the true root. A root that enables them all (systemd hosts enable most)
	// leaves nothing to refuse.
	var off []string
	for _, c := range info.Controllers {
		if !slices.Contains(strings.Fields(string(before)), c) {
			off = append(off, c)
		}
	}
	if len(off) == 0 {
		t.Logf("the true root enables every controller it offers (%s): no enabling to refuse", before)
	} else if _, err := OpenRoot(Options{Root: root, Controllers: off[:1]}); err == nil || !strings.Contains(err.Error(), "root cgroup") {
		t.Errorf("enabling %v on the true root: err = %v, want a refusal", off[:1], err)
	}
	if _, err := OpenRoot(Options{Root: root, Delegated: true}); err != nil {
		t.Errorf("Delegated on the true root should be a no-op, got %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(info.Mountpoint, "cgroup.subtree_control"))
	if string(before) != string(after) {
		t.Errorf("true root's subtree_control changed: %q -> %q", before, after)
	}
	if self, _ := ownCgroup("/proc/self/cgroup"); self != info.Self {
		t.Errorf("this process moved from %s to %s", info.Self, self)
	}
}

func TestBadInputIsRefused(t *testing.T) {
	r := testRoot(t)
	for _, name := range []string{"", ".", "..", "a/b", "../x", "/abs", "cgroup.procs", ".hidden", "a b", "x\n", strings.Repeat("n", 200)} {
		if _, err := r.Create(name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Create(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := r.Open(name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Open(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	if names, _ := r.Slices(); len(names) != 0 {
		t.Errorf("bad names created %v", names)
	}
	if _, err := r.Create("ok-name_1.2"); err != nil {
		t.Errorf("a valid name was refused: %v", err)
	}
	if _, err := r.Create("ok-name_1.2"); !errors.Is(err, os.ErrExist) {
		t.Errorf("creating an existing slice = %v, want ErrExist", err)
	}

	mount := r.Info().Mountpoint
	outside := filepath.Join(t.TempDir(), "not-cgroupfs")
	for _, root := range []string{outside, "relative/path", mount, mount + "/../etc", mount + "/a/../b", mount + "/bad name"} {
		_, err := OpenRoot(Options{Root: root})
		if err == nil {
			t.Errorf("OpenRoot(%q) succeeded", root)
		} else if !strings.Contains(err.Error(), "root") {
			t.Errorf("OpenRoot(%q) error %q does not explain the root", root, err)
		}
	}
	if exists(outside) {
		t.Errorf("%s was created", outside)
	}
	if _, err := OpenRoot(Options{Mountpoint: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "not a cgroup2") {
		t.Errorf("a tmpfs mountpoint: %v, want 'not a cgroup2 filesystem'", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCgroupNamespaceWithOutsideMount is a container with a private cgroup namespace that bind-mounts
// the host's cgroup2 hierarchy: /proc/self/cgroup reads "0::/", but the mount shows the host's root,
// two levels above the namespace's root ("/../.." in mountinfo). Detect must find its own cgroup
// below the mountpoint and put the default root in it, not at the host's root.
func TestCgroupNamespaceWithOutsideMount(t *testing.T) {
	info := requireCgroup2(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("skipped: needs unshare(1) from util-linux")
	}
	top := testutil.UniqueName("reaper-test-ns-")
	nsroot := filepath.Join(info.Mountpoint, top, "inner")
	if err := os.MkdirAll(nsroot, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		destroy(t, nsroot)
		destroy(t, filepath.Dir(nsroot))
	})
	fd, err := unix.Open(nsroot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// No new mount: the helper sees the mount made outside its namespace.
	res := runHelper(t, "detect", nil, []string{"unshare", "--cgroup", os.Args[0]},
		&syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd})
	if want := filepath.Join(nsroot, "reaper"); res.Info.Root != want {
		if res.Info.Root != "" && !strings.HasPrefix(res.Info.Root, nsroot+"/") {
			os.Remove(res.Info.Root) // made where it must not be
		}
		t.Fatalf("default root %s, want %s (own cgroup %q, error %q)", res.Info.Root, want, res.Info.Self, res.Err)
	}
	if want := "/" + top + "/inner"; res.Info.Self != want || res.Err != "" || !exists(res.Info.Root) {
		t.Errorf("own cgroup %q, error %q, root created %v; want %s, no error, created", res.Info.Self, res.Err, exists(res.Info.Root), want)
	}
}

func TestResolveSelf(t *testing.T) {
	mount := t.TempDir()
	pid := os.Getpid()
	procs := map[string]string{
		"cgroup.procs":         "",
		"a/b/cgroup.procs":     "0\n",                       // the namespace's root, empty but for pids outside it
		"a/b/sub/cgroup.procs": fmt.Sprintf("0\n%d\n", pid), // this process
		"a/c/sub/cgroup.procs": "0\n1\n",                    // another namespace's process
	}
	for name, content := range procs {
		path := filepath.Join(mount, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ shown, self, want, err string }{
		{"/", "/a/b/sub", "/a/b/sub", ""},
		{"/a", "/a/b/sub", "", "not visible"}, // the mount shows /a, so the own cgroup would be <mount>/b/sub
		{"/x", "/y/z", "", "outside"},
		{"/../..", "/sub", "/a/b/sub", ""}, // found where this process is listed, not in a/c
		{"/..", "/sub", "", "not found"},
		{"/../x", "/", "", "not found"},
	} {
		got, err := resolveSelf(mount, tc.shown, tc.self)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("resolveSelf(shown %s, self %s) = %q, %v; want %q, error containing %q", tc.shown, tc.self, got, err, tc.want, tc.err)
		}
	}
}
