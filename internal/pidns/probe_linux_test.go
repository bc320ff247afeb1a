package pidns_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestStartInCgroup: an init started with Options.Cgroup is born in that cgroup (where every session's
// init is, in cgroup containment), and InCgroup says so; one started with a directory that is no
// cgroup fails (clone3 refuses it), which the caller takes as a sign to start it outside. (An external
// test: it uses testutil, which imports pidns.)
func TestStartInCgroup(t *testing.T) {
	start := func(t *testing.T, dir string) (*pidns.Init, error) {
		t.Helper()
		f, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		opts := pidns.TestOptions(t)
		if _, err := pidns.Probe(opts); err != nil {
			t.Skipf("skipped: this host gives no PID namespaces: %v", err)
		}
		opts.Cgroup = f
		in, err := pidns.Start(opts)
		if err == nil {
			t.Cleanup(func() { pidns.End(in) })
		}
		return in, err
	}
	t.Run("cgroup", func(t *testing.T) {
		root := testutil.CgroupRoot(t)
		leaf := filepath.Join(root, "inits")
		for _, d := range []string{root, leaf} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { os.Remove(leaf) }) // after the init's end (cleanups run last first)
		in, err := start(t, leaf)
		if err != nil {
			t.Fatalf("an init in %s: %v", leaf, err)
		}
		b, err := os.ReadFile(filepath.Join(leaf, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(b)) != strconv.Itoa(in.Pid()) {
			t.Errorf("%s holds %q; want the init %d alone", leaf, b, in.Pid())
		}
	})
	t.Run("not a cgroup", func(t *testing.T) {
		if in, err := start(t, t.TempDir()); err == nil {
			t.Errorf("an init started in a directory that is no cgroup: pid %d", in.Pid())
		}
	})
}
