package container

import (
	"strings"
	"testing"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/testutil"
)

// mode is a way to run the reaper container, and the containment reaper must pick in it.
type mode struct {
	name   string
	podman []string // options for podman run
	want   string   // "cgroup" or "process"
	why    string
}

// modes returns the containers a user can give reaper, from a default one to one that may write its
// cgroups, with the containment each gets on this host. skip says why the cgroup modes cannot run
// here, if they cannot.
func modes() (ms []mode, skip string) {
	info := cgroup.Detect(cgroup.Options{})
	hybrid := info.Mode == cgroup.Hybrid
	ms = []mode{
		{name: "default", want: "process",
			why: "a default container gets no writable cgroup2: on a hybrid host it sees the v1 controllers only, on a unified host cgroup2 read-only"},
		{name: "privileged", podman: []string{"--privileged"}, want: "cgroup",
			why: "a privileged container may write its cgroupfs"},
	}
	if hybrid {
		ms[1].want = "process"
		ms[1].why = "on a hybrid host runc mounts only the v1 controllers, even in a privileged container: no cgroup2, so no cgroup containment"
	}
	if info.Mode != cgroup.Hybrid && info.Mode != cgroup.Unified {
		return ms, "skipped: the cgroup2 modes need cgroup2 on the host, and it has none (" + info.String() + ")"
	}
	rw := info.Mountpoint + ":/sys/fs/cgroup:rw"
	return append(ms,
		mode{name: "cgroup2 writable", podman: []string{"-v", rw}, want: "cgroup",
			why: "the host's cgroup2 mounted writable: reaper finds its own cgroup in it and makes its slices below"},
		mode{name: "private cgroup namespace", podman: []string{"--cgroupns", "private", "-v", rw}, want: "cgroup",
			why: "cgroup2 mounted writable in a container with its own cgroup namespace: /proc/self/cgroup reads \"0::/\", and reaper resolves its cgroup against the mount"},
	), ""
}

// TestContainmentModes runs the image in each kind of container: reaper must pick the containment
// the container allows, kill a session's escapees when the client sends DELETE (all of them in cgroup
// containment, all it can attribute in process containment), leave no slice behind, and on `podman
// stop` kill what is left, exit 0, and leave no cgroup once the container is removed.
func TestContainmentModes(t *testing.T) {
	need(t)
	ms, skip := modes()
	for _, m := range ms {
		t.Run(m.name, func(t *testing.T) {
			t.Log(m.why)
			s := startSidecar(t, serveOpts{podman: m.podman})
			if s.containment != m.want {
				t.Fatalf("reaper chose %s containment, want %s\n%s", s.containment, m.want, logs(s.name))
			}
			cs := s.connect(t)
			ps := escapees(t, cs, s.container)
			if m.want == "cgroup" {
				mine := s.cgroupV2()
				for kind, p := range ps {
					if cg := cgroupV2(p.Pid); !strings.HasPrefix(cg, mine+"/") {
						t.Errorf("%s (pid %d) is in cgroup %s, not in a slice below the container's %s", kind, p.Pid, cg, mine)
					}
				}
			}
			if err := cs.Close(); err != nil { // sends DELETE
				t.Errorf("closing the client: %v", err)
			}
			spared := s.sessionEnd(t, ps)
			if code := s.stop(t); code != 0 {
				t.Errorf("reaper exited with status %d on podman stop, not 0\n%s", code, logs(s.name))
			}
			testutil.AwaitDead(t, spared, within)
		})
		if m.want != "cgroup" {
			continue
		}
		// reaper killed has no say: the kernel kills its pid namespace, and the runtime must remove
		// the slices reaper left below the container's cgroup.
		t.Run(m.name+", podman kill", func(t *testing.T) {
			s := startSidecar(t, serveOpts{podman: m.podman})
			ps := escapees(t, s.connect(t), s.container)
			if _, err := suite.pm.run("kill", s.name); err != nil {
				t.Fatal(err)
			}
			if code, err := suite.pm.run("wait", s.name); err != nil || code != "137" {
				t.Errorf("after podman kill: exit status %s (%v), want 137 (SIGKILL)", code, err)
			}
			testutil.AwaitDead(t, without(ps), within)
		})
	}
	if skip != "" {
		t.Run("cgroup2", func(t *testing.T) { t.Skip(skip) })
	}
}
