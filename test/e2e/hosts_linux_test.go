package e2e

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// Kinds of host this machine is not, simulated: a seccomp profile that refuses clone3, a container
// whose cgroup namespace sees the host's hierarchy.

// seccompServe is a helper: it installs a seccomp filter, E2E_SECCOMP ("" answers clone3 with EPERM;
// "namespaces" refuses every namespace as container runtimes' default profiles do; "userns" answers
// user namespaces with ENOSPC, as a host where they are disabled; "setns" refuses entering one;
// "close_range" answers close_range with ENOSYS,
// as a kernel older than 5.9 does; "none"), becomes the user E2E_UID
// (and group E2E_GID) if set, and then becomes E2E_BIN with the arguments in E2E_ARGS (separated by
// spaces). The binary starts under the filter, as in such a container or on such a host. With
// E2E_NO_SYS_ADMIN set it starts without CAP_SYS_ADMIN, even as root, as in a container that keeps
// only some capabilities: dropped from the bounding and inheritable sets of the thread that executes
// it.
func seccompServe() int {
	if os.Getenv("E2E_NO_SYS_ADMIN") != "" {
		runtime.LockOSThread() // never unlocked: capabilities are per thread, and this one executes the binary
		if err := dropSysAdmin(); err != nil {
			fmt.Fprintln(os.Stderr, "dropping CAP_SYS_ADMIN:", err)
			return 1
		}
	}
	return seccompServeOn()
}

// dropSysAdmin removes CAP_SYS_ADMIN from this thread's bounding and inheritable sets: a program it
// executes, root's included, does not get it.
func dropSysAdmin() error {
	if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0, 0, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Inheritable &^= 1 << unix.CAP_SYS_ADMIN // CAP_SYS_ADMIN is 21: the first word
	return unix.Capset(&hdr, &data[0])
}

// seccompServeOn is seccompServe, on the thread that executes the binary.
func seccompServeOn() int {
	var err error
	switch os.Getenv("E2E_SECCOMP") {
	case "":
		err = testutil.DenyClone3(unix.EPERM)
	case "namespaces":
		err = testutil.DenyNamespaces(testutil.AllNamespaces, unix.EPERM)
	case "userns":
		err = testutil.DenyNamespaces(testutil.UserNamespace, unix.ENOSPC)
	case "setns":
		err = testutil.DenySyscall(unix.SYS_SETNS, unix.EPERM)
	case "close_range":
		err = testutil.DenySyscall(unix.SYS_CLOSE_RANGE, unix.ENOSYS)
	}
	if uid := os.Getenv("E2E_UID"); err == nil && uid != "" {
		u, _ := strconv.Atoi(uid)
		g, _ := strconv.Atoi(os.Getenv("E2E_GID"))
		if err = syscall.Setgroups(nil); err == nil {
			if err = syscall.Setgid(g); err == nil {
				err = syscall.Setuid(u)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TESTUTIL_HELPER=") {
			env = append(env, kv)
		}
	}
	argv := append([]string{"reaper"}, strings.Fields(os.Getenv("E2E_ARGS"))...)
	err = syscall.Exec(os.Getenv("E2E_BIN"), argv, env)
	fmt.Fprintln(os.Stderr, "exec:", err)
	return 1
}

// TestStaticBinaryUnderSeccompEPERM: the binary as built for shipping starts under a seccomp filter
// that answers clone3 with EPERM (a dynamically linked one dies inside glibc, whose pthread_create
// takes EPERM for a real failure), serves a session over stdio and runs a command in its leaf, by
// joining it before exec.
func TestStaticBinaryUnderSeccompEPERM(t *testing.T) {
	f, err := elf.Open(staticBin)
	if err != nil {
		t.Fatal(err)
	}
	libs, _ := f.ImportedLibraries()
	interp := false
	for _, p := range f.Progs {
		interp = interp || p.Type == elf.PT_INTERP
	}
	f.Close()
	if len(libs) > 0 || interp {
		t.Errorf("%s is not static: it needs %v (interpreter: %v)", staticBin, libs, interp)
	}
	p := place(t, "cgroup") // where tasks are spawned into a cgroup with clone3
	cmd := testutil.Helper("seccomp-serve", "E2E_BIN="+staticBin,
		"E2E_ARGS=serve --containment cgroup "+strings.Join(p.args(), " "))
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	cs := connectCommand(t, cmd)
	r := bash(t, cs, "grep '^Seccomp:' /proc/self/status; grep '^0::' /proc/self/cgroup")
	lines := strings.Split(strings.TrimSpace(r.Output), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "Seccomp: 2" {
		t.Fatalf("the task is not under the filter: %q", r.Output)
	}
	rel := strings.TrimPrefix(p.root, cgroup.Detect(cgroup.Options{}).Mountpoint)
	if !strings.HasPrefix(lines[1], "0::"+rel+"/r") || !strings.Contains(lines[1], "/s-1/l-") {
		t.Errorf("the task ran in %q, want its leaf below %s", lines[1], rel)
	}
	if !stderr.Await("clone3 into a cgroup is refused") {
		t.Errorf("no warning that clone3 is refused:\n%s", stderr)
	}
}

// TestCgroupNamespaceShowingTheHostHierarchy: reaper serve in a container with a cgroup namespace of
// its own and the host's cgroup2 bind-mounted at /sys/fs/cgroup. Its slices go below its own cgroup
// (not the host's top-level "reaper"), it moves itself into a leaf of that delegated cgroup, and the
// root it made is gone when it exits.
func TestCgroupNamespaceShowingTheHostHierarchy(t *testing.T) {
	info := cgroup.Detect(cgroup.Options{})
	if os.Geteuid() != 0 || !info.Usable() {
		t.Skipf("skipped: needs root and a writable cgroup2 hierarchy: %s", info)
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("skipped: needs unshare(1) from util-linux")
	}
	base, err := cgroup.OpenRoot(cgroup.Options{Root: filepath.Join(info.Mountpoint, testutil.UniqueName("reaper-e2e-ns-"))})
	if err != nil {
		t.Fatal(err)
	}
	container, err := base.Create("container")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		container.Kill()
		container.WaitEmpty(context.Background(), time.Now().Add(30*time.Second))
		if err := container.Remove(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		base.Release()
	})
	fd, err := container.OpenFD()
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	script := `exec "$0" "$@"`
	if info.Mountpoint != "/sys/fs/cgroup" {
		script = fmt.Sprintf(`mount --bind %s /sys/fs/cgroup && exec "$0" "$@"`, info.Mountpoint)
	}
	cmd := exec.Command("unshare", "--cgroup", "--mount", "--propagation", "private", "/bin/sh", "-c", script, bin, "serve", "--state-dir", t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	cs := connectCommand(t, cmd)

	server := serverOf(t, cmd.Process.Pid)
	r := bash(t, cs, "grep '^0::' /proc/self/cgroup")
	if got := strings.TrimSpace(r.Output); !strings.HasPrefix(got, "0::/reaper/r"+strconv.Itoa(server)+"-") {
		t.Errorf("the task ran in %q, want a leaf below /reaper of the container's own cgroup\n%s", got, stderr)
	}
	// Seen from the host: reaper's guard (unshare and sh exec'd it, so it kept their pid) and its
	// server are in the container's supervisor leaf, the slices in the container's reaper directory;
	// nothing is left in the container's cgroup itself, which has become an inner node.
	pids, _ := os.ReadFile(filepath.Join(container.Path(), "supervisor", "cgroup.procs"))
	for _, pid := range []int{cmd.Process.Pid, server} {
		if !strings.Contains("\n"+string(pids), "\n"+strconv.Itoa(pid)+"\n") {
			t.Errorf("reaper's pid %d is not in %s/supervisor (it holds %q)", pid, container.Path(), pids)
		}
	}
	if left, _ := os.ReadFile(filepath.Join(container.Path(), "cgroup.procs")); len(left) > 0 {
		t.Errorf("processes left in the container's own cgroup: %q", left)
	}
	if _, err := os.Stat(filepath.Join(container.Path(), "reaper")); err != nil {
		t.Errorf("no reaper directory in the container's cgroup: %v", err)
	}
	// Over stdio the start-up line waits for the probe of PID namespaces, the session's does not:
	// either may come first.
	if !stderr.Await("this process moved into /sys/fs/cgroup/" + filepath.Base(base.Path()) + "/container/supervisor") {
		t.Errorf("the start-up line does not say where reaper moved:\n%s", stderr)
	}
	cs.Close()
	if _, err := os.Stat(filepath.Join(container.Path(), "reaper")); !os.IsNotExist(err) {
		t.Errorf("the container's reaper directory was left behind (%v)\n%s", err, stderr)
	}
}

// TestExplicitCgroupRootThatFails: a root that was asked for and cannot be used stops reaper serve
// with a message naming it, whatever the containment mode.
func TestExplicitCgroupRootThatFails(t *testing.T) {
	for _, args := range [][]string{
		{"--cgroup-root", "relative/root"},
		{"--containment", "auto", "--cgroup-root", "/sys/fs/cgroup/a/../b"},
		{"--containment", "process", "--cgroup-root", "/sys/fs/cgroup/x"},
	} {
		cmd := reaperCmd(append([]string{"serve"}, args...)...)
		cmd.Stdin = strings.NewReader("") // stdio serving would end at EOF, with status 0
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		root := args[len(args)-1]
		if code != 1 || !strings.Contains(string(out), "cgroup root "+root+" was asked for") {
			t.Errorf("serve %q: exit %d, %q; want 1 and a message naming the root", args, code, out)
		}
	}
}

// TestLogsTheAddressAskedFor: --http 0.0.0.0:PORT is logged as such, not as the listener's [::],
// and so is --http :PORT (every address), with reaper's own token off loopback; an address that is
// none is refused as such.
func TestLogsTheAddressAskedFor(t *testing.T) {
	for _, args := range [][]string{{"--http", "0.0.0.0:0", "--token", testutil.UniqueName("t-")}, {"--http", ":0"}} {
		pl := place(t, "process")
		t.Cleanup(func() { os.Remove(filepath.Join(pl.stateDir, instance.TokenFile)) }) // reaper's own, kept by design
		cmd := reaperCmd(append(append([]string{"serve"}, args...), pl.args()...)...)
		cmd.Env = append(os.Environ(), "REAPER_TOKEN_FILE=") // no token given: reaper's own (and none from withToken)
		p := startCmd(t, cmd, nil, nil)
		p.awaitServing(t)
		if !regexp.MustCompile(`^http://0\.0\.0\.0:[1-9][0-9]*/mcp$`).MatchString(p.url) {
			t.Errorf("%v: the start-up line names %q, want http://0.0.0.0:PORT/mcp with the port reaper got:\n%s", args, p.url, p.stderr)
		}
	}
	for _, addr := range []string{":bad", "nonsense"} {
		out, code := runOnce(t, nil, append([]string{"serve", "--http", addr}, place(t, "process").args()...)...)
		if code != 2 || !strings.Contains(out, "--http "+addr+": ") || !strings.Contains(out, "give HOST:PORT") || strings.Contains(out, "insecure") {
			t.Errorf("serve --http %s: exit %d, %q; want 2 and a message about the address", addr, code, out)
		}
	}
}
