package container

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// TestStdio runs the image as MCP clients run a containerized stdio server, `podman run -i --rm
// IMAGE`, drives it with the go-sdk client, and closes the client: reaper must end the session, kill
// every process it started, and exit 0 by itself, before the client's transport resorts to signals;
// podman then removes the container with its cgroups.
func TestStdio(t *testing.T) {
	need(t)
	ms, skip := modes()
	for _, m := range ms {
		if m.name != "default" && m.name != "cgroup2 writable" {
			continue // the other modes differ from these two only in what TestContainmentModes checks
		}
		t.Run(m.name, func(t *testing.T) {
			stdio(t, m, "serve", "--grace", grace.String())
		})
	}
	if skip != "" {
		t.Run("cgroup2", func(t *testing.T) { t.Skip(skip) })
	}
	// The image's own command, `reaper serve` with its default grace of 5 s. A task that ignores SIGTERM
	// holds the teardown for that long, and the go-sdk client sends SIGTERM 5 s after closing stdin
	// (other clients sooner): reaper may be signalled mid-teardown, and nothing may survive all the same.
	t.Run("default command", func(t *testing.T) {
		stdio(t, ms[0])
	})
}

// stdio runs the image over stdio in mode m with args (none: the image's command), starts escapees in
// the session and closes the client. With args it also checks that reaper exited 0 by itself.
func stdio(t *testing.T, m mode, args ...string) {
	pm := suite.pm
	name := testutil.UniqueName("reaper-ctest-")
	dir := t.TempDir()
	run := append([]string{"run", "-i", "--rm", "--name", name, "--pull=never", "--network", "none",
		"--cgroup-parent", pm.cgroupParent, "-v", dir + ":" + shared}, m.podman...)
	cmd := pm.command(context.Background(), append(append(run, suite.image), args...)...)
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	var c container
	t.Cleanup(func() { removeContainer(t, name, &c) })
	cs := connectStdio(t, cmd)
	var err error
	if c, err = pm.inspect(name); err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	ps := escapees(t, cs, c)

	closed := time.Now()
	closeErr := cs.Close() // closes stdin; SIGTERM after 5 s, SIGKILL after 10 s
	took := time.Since(closed)
	testutil.AwaitDead(t, without(ps), within)
	c.assertTeardown(t)
	signalled := strings.Contains(stderr.String(), "signal=")
	t.Logf("podman run exited %v after the client closed stdin (signalled: %v, exit: %v)", took.Round(time.Millisecond), signalled, cmd.ProcessState)
	if len(args) > 0 {
		if closeErr != nil || cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("podman run -i exited with %v (%v), want 0\n%s", cmd.ProcessState, closeErr, stderr.String())
		}
		if signalled {
			t.Errorf("reaper did not exit on EOF by itself: the client had to signal it\n%s", stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), `containment="`+m.want) {
		t.Errorf("reaper did not log %s containment:\n%s", m.want, stderr.String())
	}
	testutil.Eventually(t, "podman run --rm to remove the container", func() bool {
		_, err := pm.run("container", "exists", name)
		return err != nil
	})
}
