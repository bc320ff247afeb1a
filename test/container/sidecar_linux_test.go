package container

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// serveOpts says how to run reaper serving MCP over HTTP in a container.
type serveOpts struct {
	// pod is the pod to run in, whose network is the host's; empty means a container of its own with
	// --network host. Either way reaper listens on the host's loopback.
	pod string
	// podman holds more options for `podman run` (the containment modes).
	podman []string
	// reaper holds more arguments for `reaper serve`.
	reaper []string
}

// grace is the grace period the reaper containers run with: a SIGTERM-ignoring process takes that
// long to die at every session end.
const grace = time.Second

// within is how long a session's processes may take to die after the session ends: generous, since
// podman and other tests load the machine.
const within = grace + 15*time.Second

// sidecar is a container running `reaper serve --http` on the host's loopback.
type sidecar struct {
	container
	url   string
	token string // the bearer token its clients send (REAPER_TOKEN in the container)
	// admin is the admin endpoint's base URL (http://:PORT for --admin :0), if reaper serves one.
	admin string
	// containment is the mode reaper logged at start: "cgroup" or "process".
	containment string
	// before are the processes of its pid namespace once it served, by pid in the namespace.
	before map[int]testutil.Proc
	// cgroups are the cgroup2 directories in and below its cgroup once it served; nil where the host
	// has no cgroup2.
	cgroups []string
}

// startSidecar runs reaper in a container with o and waits until it serves. Cleanup removes the
// container and checks that no cgroup of it is left in any hierarchy.
//
// The container shares the host's network, where any other program may take a port: reaper listens
// on port 0, and the test reads the port from reaper's own start-up line, so the endpoint it uses is
// the one reaper holds.
func startSidecar(t *testing.T, o serveOpts) *sidecar {
	t.Helper()
	pm := suite.pm
	name := testutil.UniqueName("reaper-ctest-")
	dir := t.TempDir()
	args := []string{"run", "-d", "--name", name, "--pull=never", "-v", dir + ":" + shared}
	if o.pod != "" {
		args = append(args, "--pod", o.pod)
	} else {
		args = append(args, "--network", "host", "--cgroup-parent", pm.cgroupParent)
	}
	token := testutil.UniqueName("tok-")
	args = append(append(args, "-e", "REAPER_TOKEN="+token), o.podman...)
	args = append(args, suite.image, "serve", "--http", "127.0.0.1:0", "--grace", grace.String())
	args = append(args, o.reaper...)
	var c container
	t.Cleanup(func() { removeContainer(t, name, &c) })
	if _, err := pm.run(args...); err != nil {
		t.Fatal(err)
	}
	s := newSidecar(t, name, dir)
	s.token = token
	c = s.container
	return s
}

// newSidecar waits until reaper in the running container name serves over HTTP, and returns it as
// it is then. dir is the test's directory mounted at shared in the container.
func newSidecar(t *testing.T, name, dir string) *sidecar {
	t.Helper()
	line := awaitLogLine(t, name, testutil.ServingHTTP)
	c, err := suite.pm.inspect(name)
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	s := &sidecar{container: c, url: line["url"], admin: line["admin"], before: c.procs()}
	s.containment, _, _ = strings.Cut(line["containment"], " ")
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") || s.containment == "" {
		t.Fatalf("reaper's start-up line names no loopback endpoint or no containment: %v\n%s", line, logs(name))
	}
	if dir := s.cgroupV2(); dir != "" {
		s.cgroups = cgroupTree(dir)
	}
	return s
}

// logWait bounds the wait for a container's log line: podman, conmon and the other tests load the
// machine, and conmon writes the log after the container wrote it.
const logWait = 2 * time.Minute

// awaitLogLine polls the container name's log until it holds a line whose message is msg, and returns
// that line's attributes. It fails the test, with the log, if the container stops running first or
// the line does not come within logWait.
func awaitLogLine(t *testing.T, name, msg string) map[string]string {
	t.Helper()
	deadline := time.Now().Add(logWait)
	for {
		log := logs(name)
		if attrs, ok := testutil.LogLine(log, msg); ok {
			return attrs
		}
		status, code, err := suite.pm.state(name)
		switch {
		case err != nil:
			t.Fatalf("waiting for %q in the log of container %s: %v\n%s", msg, name, err, log)
		case status != "running":
			// What it wrote before it stopped is all in the log once podman says it stopped.
			if attrs, ok := testutil.LogLine(logs(name), msg); ok {
				return attrs
			}
			t.Fatalf("container %s is %s (exit status %d) and never logged %q:\n%s", name, status, code, msg, log)
		case time.Now().After(deadline):
			t.Fatalf("container %s has not logged %q after %v:\n%s", name, msg, logWait, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cgroupV2 returns the host path of the container's own cgroup in the cgroup2 hierarchy (podman's
// libpod-<id>), or "" where the host has no cgroup2.
func (s *sidecar) cgroupV2() string {
	for _, dir := range cgroupDirs(suite.pm.cgroupParent, s.id) {
		if isCgroup2(dir) && strings.HasSuffix(dir, s.id) {
			return dir
		}
	}
	return ""
}

// cgroupTree lists dir and every directory below it.
func cgroupTree(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// awaitClean waits until ps are dead, then checks that the container's pid namespace holds only what
// it held before the session (and spared, which the mode cannot attribute), and that the container's
// cgroup2 tree is as it was before the session: the session's slice is gone.
func (s *sidecar) awaitClean(t *testing.T, ps []testutil.Proc, spared ...testutil.Proc) {
	t.Helper()
	t.Logf("the session's processes were dead %v after the test's last request", testutil.AwaitDead(t, ps, within).Round(time.Millisecond))
	for nspid, p := range s.procs() {
		if _, ok := s.before[nspid]; !ok && !slices.Contains(spared, p) {
			t.Errorf("pid %d (%d in the container) was not there before the session and survived it: %s", p.Pid, nspid, describe(p.Pid))
		}
	}
	if s.cgroups == nil {
		return
	}
	testutil.Eventually(t, "the session's cgroups to be removed", func() bool {
		return slices.Equal(cgroupTree(s.cgroupV2()), s.cgroups)
	})
}

// assertTeardown fails the test unless reaper's own teardown ended the session's processes: only it
// sends SIGTERM to the records-sigterm escapee.
func (c container) assertTeardown(t *testing.T) {
	t.Helper()
	if !c.sigtermRecorded() {
		t.Error("the escapee that records SIGTERM got none: reaper's teardown did not reach it, whatever killed it")
	}
}

// stop stops the container with `podman stop -t 30` (SIGTERM, SIGKILL after 30 s) and returns its exit code.
func (s *sidecar) stop(t *testing.T) int {
	t.Helper()
	if _, err := suite.pm.run("stop", "-t", "30", s.name); err != nil {
		t.Fatal(err)
	}
	status, code, err := suite.pm.state(s.name)
	if err != nil {
		t.Fatal(err)
	}
	if status != "exited" && status != "stopped" {
		t.Fatalf("after podman stop, container %s is %s", s.name, status)
	}
	s.assertTeardown(t)
	return code
}

// removeContainer removes the container name (at once, with SIGKILL if it runs) and, once it was
// inspected into c, fails the test if a cgroup of it is left in any hierarchy, or a cgroup directory
// of a reaper instance that ran in it anywhere in the cgroup2 hierarchy.
func removeContainer(t *testing.T, name string, c *container) {
	t.Helper()
	if _, err := suite.pm.run("rm", "-f", "-t", "0", "--ignore", name); err != nil {
		t.Error(err)
		return
	}
	if c.id == "" {
		return
	}
	if left := cgroupDirs(suite.pm.cgroupParent, c.id); len(left) > 0 {
		t.Errorf("cgroups of container %s left after its removal: %v", name, left)
	}
	if left := cgroupsNamed(c.instances); len(left) > 0 {
		t.Errorf("cgroups of reaper in container %s left after its removal: %v", name, left)
	}
}

// logs returns what the container wrote to its standard output and error.
func logs(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	out, err := suite.pm.command(ctx, "logs", name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("podman logs %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// describe says what pid is, for failure messages.
func describe(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "gone"
	}
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

// createPod creates a pod sharing the host's network and returns its name. Cleanup removes it.
func createPod(t *testing.T) string {
	t.Helper()
	name := testutil.UniqueName("reaper-ctest-pod-")
	t.Cleanup(func() {
		if _, err := suite.pm.run("pod", "rm", "-f", "-t", "0", "--ignore", name); err != nil {
			t.Error(err)
		}
	})
	if _, err := suite.pm.run("pod", "create", "--name", name, "--network", "host", "--cgroup-parent", suite.pm.cgroupParent); err != nil {
		t.Fatal(err)
	}
	return name
}

// sessionEnd checks what a session's end must kill in s's containment mode: everything, or, in
// process containment, everything but the unmarked escapee, which it cannot attribute (see
// escapeScript); that one is returned so that the caller can check it dies when reaper stops.
func (s *sidecar) sessionEnd(t *testing.T, ps map[string]testutil.Proc) (spared []testutil.Proc) {
	t.Helper()
	defer s.assertTeardown(t)
	switch s.containment {
	case "cgroup":
		s.awaitClean(t, without(ps))
		return nil
	case "process":
		unmarked := ps["unmarked"]
		s.awaitClean(t, without(ps, "unmarked"), unmarked)
		state := "survived"
		if !testutil.Running(unmarked) {
			state = "did not survive"
		}
		t.Logf("process containment: the escapee that cleared its environment, took a new session and was reparented %s the session's end, as the README says it may", state)
		return []testutil.Proc{unmarked}
	}
	t.Fatalf("unknown containment %q", s.containment)
	return nil
}
