package container

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// runEntrypoint is the image used as a job's init, as the README shows it:
// ENTRYPOINT ["reaper", "run", "--"].
var runEntrypoint = []string{"--entrypoint", `["/usr/local/bin/reaper", "run", "--grace", "1s", "--"]`}

// runJob runs the image with the reaper run entrypoint and the job argv, to its end, and returns the
// container's exit status and what it wrote on stderr. dir is mounted at shared.
func runJob(t *testing.T, dir string, argv ...string) (int, string) {
	t.Helper()
	pm := suite.pm
	name := testutil.UniqueName("reaper-ctest-")
	args := append([]string{"run", "--rm", "--name", name, "--pull=never", "--network", "none",
		"--cgroup-parent", pm.cgroupParent, "-v", dir + ":" + shared}, runEntrypoint...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := pm.command(ctx, append(append(args, suite.image), argv...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	case err != nil:
		t.Fatalf("podman run: %v\n%s", err, &stderr)
	}
	return 0, stderr.String()
}

// TestRunAsEntrypoint: the image with `reaper run --` as its entrypoint exits with the job's status,
// names what the job left running, and ends it with SIGTERM itself (a process that records SIGTERM
// shows that it was reaper, not the kernel's end of the pid namespace when PID 1 exits); as PID 1 it
// reaps the zombies the job makes.
func TestRunAsEntrypoint(t *testing.T) {
	need(t)
	t.Run("leftovers", func(t *testing.T) {
		dir := t.TempDir()
		code, stderr := runJob(t, dir, "sh", "-c", `
setsid sleep 1000 &
(sleep 1001 &)
nohup sleep 1002 >/dev/null 2>&1 &
sh -c 'trap "echo records-sigterm >> `+sigtermFile+`; exit 0" TERM; while :; do sleep 0.1; done' &
sleep 0.3
exit 3`)
		if code != 3 {
			t.Errorf("the container exited %d, want the job's 3\n%s", code, stderr)
		}
		// The four, and whatever they run at that moment (the loop's sleep).
		n := 0
		if m := regexp.MustCompile(`reaper run: killed (\d+) leftover process(?:es)?: `).FindStringSubmatch(stderr); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		if n < 4 {
			t.Errorf("the summary names %d leftovers, want at least the 4:\n%s", n, stderr)
		}
		b, _ := os.ReadFile(filepath.Join(dir, filepath.Base(sigtermFile)))
		if !strings.Contains(string(b), "records-sigterm") {
			t.Errorf("the leftover that records SIGTERM did not get it: reaper did not end the job's leftovers itself")
		}
	})
	t.Run("zombies", func(t *testing.T) {
		// A parent that never waits makes 100 zombies and goes; as init of the container's pid
		// namespace, reaper (with its server, the subreaper) must reap them.
		// The base image is busybox with few applets: the zombies are counted with the shell alone.
		code, stderr := runJob(t, t.TempDir(), "sh", "-c", `
zombies() { n=0; for f in /proc/[0-9]*/status; do while read k v rest; do if [ "$k" = State: ]; then [ "$v" = Z ] && n=$((n+1)); break; fi; done < "$f" 2>/dev/null; done; echo $n; }
(i=0; while [ $i -lt 100 ]; do true & i=$((i+1)); done; exec sleep 0.3)
i=0; n=1; while [ $i -lt 100 ]; do n=$(zombies); [ "$n" -eq 0 ] && break; sleep 0.05; i=$((i+1)); done
echo "zombies $n" >&2; exit 7`)
		if code != 7 || !strings.Contains(stderr, "zombies 0") {
			t.Errorf("exit %d, stderr %q: want the job's 7 and no zombie left", code, stderr)
		}
	})
}
