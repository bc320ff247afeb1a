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

// TestProbeKeepCgroup: ProbeKeep's init is born in Options.Cgroup where it can be, and where no start
// in it works (here a directory that is no cgroup, which clone3 refuses) the probe is made again
// outside, so the answer is still the host's and InCgroup says where the init is. (An external test:
// it uses testutil, which imports pidns.)
func TestProbeKeepCgroup(t *testing.T) {
	probe := func(t *testing.T, dir string) *pidns.Init {
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
		_, in, err := pidns.ProbeKeep(opts)
		if err != nil {
			t.Fatalf("the probe in %s: %v", dir, err)
		}
		t.Cleanup(func() { pidns.End(in, opts) })
		return in
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
		in := probe(t, leaf)
		b, err := os.ReadFile(filepath.Join(leaf, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if !in.InCgroup() || strings.TrimSpace(string(b)) != strconv.Itoa(in.Pid()) {
			t.Errorf("InCgroup %v, %s holds %q; want the init %d alone", in.InCgroup(), leaf, b, in.Pid())
		}
	})
	t.Run("not a cgroup", func(t *testing.T) {
		in := probe(t, t.TempDir())
		if in.InCgroup() {
			t.Error("InCgroup says the init was born in a directory that is no cgroup")
		}
		if err := in.Err(); err != nil {
			t.Errorf("the init the probe kept: %v", err)
		}
	})
}
