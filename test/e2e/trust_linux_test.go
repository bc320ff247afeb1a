package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// The trust boundary (docs/security.md): nothing a task or another local user can write steers
// reaper. These tests plant hostile input at every path of the inventory and check, with the real
// binary, that nothing outside was touched (a victim process in a victim cgroup, a root-only file, a
// directory), nothing hung, memory stayed bounded and sessions still ended clean.

// deadName is an instance name no process has: start time 7 is long past for any pid.
const deadName = "r4194303-7"

// maxRSS bounds the peak resident memory of `reaper sweep` and `reaper ps` whatever they find.
const maxRSS = 64 << 20

// runBounded runs the binary with args (prefixed by wrap, if set) and fails the test if it does not
// end within 20 s or is killed by a signal; it returns the output, the exit status and the peak RSS
// of the process it started (the binary, which wrap's commands exec), measured by runPeak.
func runBounded(t testing.TB, wrap []string, args ...string) (string, int, int64) {
	t.Helper()
	argv := append(append(wrap[:len(wrap):len(wrap)], bin), args...)
	run := runPeak(t, argv, 20*time.Second)
	if run.timedOut {
		t.Fatalf("reaper %v did not end within 20 s\n%s", args, run.out)
	}
	if run.status.Signaled() {
		t.Fatalf("reaper %v died of %v\n%s", args, run.status.Signal(), run.out)
	}
	return run.out, run.status.ExitStatus(), run.peak
}

// lookAndSweep runs `reaper ps`, `reaper ps --json`, `reaper sweep --dry-run --json` and `reaper
// sweep --json` with p's flags (after wrap, if set), and checks each: it ends, exits 0 or 1, peaks
// below maxRSS (without the race detector), prints nothing of the victim's file and no terminal
// escape. It returns the sweep's report.
func lookAndSweep(t testing.TB, p placement, v *testutil.Victim, wrap ...string) sweepReport {
	t.Helper()
	var rep sweepReport
	for _, args := range [][]string{{"ps"}, {"ps", "--json"}, {"sweep", "--dry-run", "--json"}, {"sweep", "--json"}} {
		out, code, peak := runBounded(t, wrap, append(args, p.args()...)...)
		if code != 0 && code != 1 {
			t.Errorf("reaper %v: exit %d\n%s", args, code, out)
		}
		if peak > maxRSS && !raceEnabled { // the race detector multiplies memory use
			t.Errorf("reaper %v peaked at %d MiB", args, peak>>20)
		}
		if peak == 0 {
			t.Errorf("reaper %v: no peak memory measured at its exit", args)
		}
		if strings.Contains(out, v.Secret) {
			t.Errorf("reaper %v printed the victim's secret:\n%s", args, out)
		}
		if strings.ContainsAny(out, "\x1b\x07\u009b") {
			t.Errorf("reaper %v printed terminal control characters: %q", args, out)
		}
		if args[0] == "sweep" && args[1] == "--json" {
			js, _, _ := strings.Cut(out, "\nreaper sweep:") // a failure is reported after the JSON
			if err := json.Unmarshal([]byte(js), &rep); err != nil {
				t.Errorf("reaper sweep --json printed %q: %v", out, err)
			}
		}
	}
	return rep
}

// sweepReport is what `reaper sweep --json` prints, as far as these tests read it.
type sweepReport struct {
	Dead []struct {
		Name     string `json:"name"`
		Slice    string `json:"slice"`
		StateDir string `json:"state_dir"`
	} `json:"dead"`
	Live    []string `json:"live"`
	Ignored []struct {
		Path   string `json:"path"`
		Reason string `json:"reason"`
	} `json:"ignored"`
}

func (r sweepReport) ignored(path string) bool {
	for _, ig := range r.Ignored {
		if ig.Path == path {
			return true
		}
	}
	return false
}

// instanceDir makes a directory of a (dead) instance's in the state directory, as reaper would:
// root's, mode 0700.
func instanceDir(t testing.TB, p placement, name string) string {
	t.Helper()
	dir := filepath.Join(p.stateDir, "reaper-"+name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// record writes an instance record naming slice into dir.
func record(t testing.TB, dir, name, slice string) {
	t.Helper()
	pid, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(name, "-")[0], "r"))
	start, _ := strconv.ParseUint(strings.Split(name, "-")[1], 10, 64)
	b, _ := json.Marshal(map[string]any{"name": name, "pid": pid, "start": start, "slice": slice, "state_dir": dir,
		"containment": "cgroup", "started": time.Now()})
	if err := os.WriteFile(filepath.Join(dir, "instance.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// hostileEnv is what a case plants against.
type hostileEnv struct {
	p      placement
	mount  string // the cgroup2 mountpoint; "" in process containment
	v      *testutil.Victim
	live   string // the slice of a live instance on the same root; "" in process containment
	ownCg  string // the test's own cgroup, an ancestor of every reaper it starts
	wrap   []string
	remove []string // what the case made beyond the state directory, removed after it
}

// hostileCase plants one hostile input; check, if set, looks at the sweep's report.
type hostileCase struct {
	name   string
	cgroup bool // needs cgroup containment
	plant  func(t *testing.T, e *hostileEnv)
	check  func(t *testing.T, e *hostileEnv, rep sweepReport)
}

// forged plants a dead instance's record naming slice(e).
func forged(slice func(e *hostileEnv) string) func(*testing.T, *hostileEnv) {
	return func(t *testing.T, e *hostileEnv) { record(t, instanceDir(t, e.p, deadName), deadName, slice(e)) }
}

// ignoredSlice checks that the record's slice was reported and left alone.
func ignoredSlice(slice func(e *hostileEnv) string) func(*testing.T, *hostileEnv, sweepReport) {
	return func(t *testing.T, e *hostileEnv, rep sweepReport) {
		if !rep.ignored(slice(e)) {
			t.Errorf("the forged record's slice %s is not reported as ignored: %+v", slice(e), rep.Ignored)
		}
	}
}

// plantFile plants, in a dead instance's directory, make's entry as its instance.json.
func plantFile(make func(t *testing.T, e *hostileEnv, path string) error) func(*testing.T, *hostileEnv) {
	return func(t *testing.T, e *hostileEnv) {
		dir := instanceDir(t, e.p, deadName)
		if err := make(t, e, filepath.Join(dir, "instance.json")); err != nil {
			t.Fatal(err)
		}
	}
}

// plantSessionFile plants make's entry as the session record of a dead instance's session s-1.
func plantSessionFile(make func(t *testing.T, e *hostileEnv, path string) error) func(*testing.T, *hostileEnv) {
	return func(t *testing.T, e *hostileEnv) {
		dir := instanceDir(t, e.p, deadName)
		record(t, dir, deadName, "")
		os.Mkdir(filepath.Join(dir, "s-1"), 0o700)
		if err := make(t, e, filepath.Join(dir, "s-1", "session.json")); err != nil {
			t.Fatal(err)
		}
	}
}

var (
	fifo       = func(t *testing.T, e *hostileEnv, path string) error { return unix.Mkfifo(path, 0o600) }
	zeroLink   = func(t *testing.T, e *hostileEnv, path string) error { return os.Symlink("/dev/zero", path) }
	victimLink = func(t *testing.T, e *hostileEnv, path string) error { return os.Symlink(e.v.File, path) }
	device     = func(t *testing.T, e *hostileEnv, path string) error {
		return unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 5)))
	}
	// huge is a sparse file of 1 GiB: reading it whole would take that much memory.
	huge = func(t *testing.T, e *hostileEnv, path string) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Truncate(1 << 30)
	}
	escapeRecord = func(t *testing.T, e *hostileEnv, path string) error {
		b, _ := json.Marshal(map[string]any{"id": "x\x1b]0;pwned\x07", "name": "s-1", "tasks": []map[string]any{
			{"id": "t-0123456789abcdef", "command": "\x1b[2J\x1b[31mrm -rf /\u009b"}}})
		return os.WriteFile(path, b, 0o600)
	}
)

// hostileCases are the hostile inputs at the paths of the inventory that a sweep or a listing reads:
// records that name what must not be touched, and every kind of file where a record or a directory
// is expected.
var hostileCases = []hostileCase{
	{"record naming a cgroup outside the root", true, forged(func(e *hostileEnv) string { return e.v.Cgroup }),
		ignoredSlice(func(e *hostileEnv) string { return e.v.Cgroup })},
	{"record naming the cgroup2 root", true, forged(func(e *hostileEnv) string { return e.mount }),
		ignoredSlice(func(e *hostileEnv) string { return e.mount })},
	{"record naming an ancestor of reaper's own cgroup", true, forged(func(e *hostileEnv) string { return e.ownCg }),
		ignoredSlice(func(e *hostileEnv) string { return e.ownCg })},
	{"record naming the root itself", true, forged(func(e *hostileEnv) string { return e.p.root }),
		ignoredSlice(func(e *hostileEnv) string { return e.p.root })},
	{"record naming a live instance's slice", true, forged(func(e *hostileEnv) string { return e.live }),
		ignoredSlice(func(e *hostileEnv) string { return e.live })},
	{"record naming a path with dot-dot", true, forged(func(e *hostileEnv) string { return e.p.root + "/../" + filepath.Base(e.v.Cgroup) }), nil},
	{"slice under the root that is a mount point", true, func(t *testing.T, e *hostileEnv) {
		target := filepath.Join(e.p.root, deadName)
		if err := os.Mkdir(target, 0o755); err != nil {
			t.Fatal(err)
		}
		e.remove = append(e.remove, target)
		// In a mount namespace of the sweep's own: the machine's mounts are not touched.
		e.wrap = []string{"unshare", "--mount", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" "$2" && shift 2 && exec "$@"`, "sh", e.v.Cgroup, target}
	}, func(t *testing.T, e *hostileEnv, rep sweepReport) {
		if !rep.ignored(filepath.Join(e.p.root, deadName)) {
			t.Errorf("the mount point is not reported as ignored: %+v", rep.Ignored)
		}
	}},
	{"cgroup under the root that is no instance's", true, func(t *testing.T, e *hostileEnv) {
		dir := filepath.Join(e.p.root, "victim")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		e.remove = append(e.remove, dir)
	}, nil},
	{"record naming another instance", false, func(t *testing.T, e *hostileEnv) {
		record(t, instanceDir(t, e.p, deadName), "r4194302-7", "")
	}, nil},
	{"record that is not JSON", false, plantFile(func(t *testing.T, e *hostileEnv, path string) error {
		return os.WriteFile(path, []byte("\x1b[2J{{{"), 0o600)
	}), nil},
	{"record that is a link to a root-only file", false, plantFile(victimLink), nil},
	{"record that is a link to /dev/zero", false, plantFile(zeroLink), nil},
	{"record that is a dangling link", false, plantFile(func(t *testing.T, e *hostileEnv, path string) error {
		return os.Symlink("/nonexistent/instance.json", path)
	}), nil},
	{"record that is a FIFO", false, plantFile(fifo), nil},
	{"record that is a link to a FIFO", false, plantFile(func(t *testing.T, e *hostileEnv, path string) error {
		target := filepath.Join(t.TempDir(), "fifo")
		if err := unix.Mkfifo(target, 0o600); err != nil {
			return err
		}
		return os.Symlink(target, path)
	}), nil},
	{"record that is a device", false, plantFile(device), nil},
	{"record that is a directory", false, plantFile(func(t *testing.T, e *hostileEnv, path string) error { return os.Mkdir(path, 0o700) }), nil},
	{"record of 1 GiB", false, plantFile(huge), nil},
	{"record owned by another user", false, plantFile(func(t *testing.T, e *hostileEnv, path string) error {
		record(t, filepath.Dir(path), deadName, "")
		return os.Chown(path, 65534, 65534)
	}), nil},
	{"instance directory that is a link to a directory", false, func(t *testing.T, e *hostileEnv) {
		if err := os.Symlink(e.v.Dir, filepath.Join(e.p.stateDir, "reaper-"+deadName)); err != nil {
			t.Fatal(err)
		}
	}, nil},
	{"instance directory that is a FIFO", false, func(t *testing.T, e *hostileEnv) {
		if err := unix.Mkfifo(filepath.Join(e.p.stateDir, "reaper-"+deadName), 0o600); err != nil {
			t.Fatal(err)
		}
	}, nil},
	{"instance directory owned by another user", false, func(t *testing.T, e *hostileEnv) {
		dir := instanceDir(t, e.p, deadName)
		record(t, dir, deadName, "")
		os.Chown(dir, 65534, 65534)
	}, nil},
	{"instance directory without a record", false, func(t *testing.T, e *hostileEnv) { instanceDir(t, e.p, deadName) }, nil},
	{"session record that is a link to a root-only file", false, plantSessionFile(victimLink), nil},
	{"session record that is a FIFO", false, plantSessionFile(fifo), nil},
	{"session record that is a link to /dev/zero", false, plantSessionFile(zeroLink), nil},
	{"session record of 1 GiB", false, plantSessionFile(huge), nil},
	{"session record full of terminal escapes", false, plantSessionFile(escapeRecord), nil},
	{"session directory that is a link to a directory", false, func(t *testing.T, e *hostileEnv) {
		dir := instanceDir(t, e.p, deadName)
		record(t, dir, deadName, "")
		if err := os.Symlink(e.v.Dir, filepath.Join(dir, "s-1")); err != nil {
			t.Fatal(err)
		}
	}, nil},
	{"entries that are no instance's", false, func(t *testing.T, e *hostileEnv) {
		os.Symlink(e.v.Dir, filepath.Join(e.p.stateDir, "reaper-r1-1-x"))
		unix.Mkfifo(filepath.Join(e.p.stateDir, "fifo"), 0o600)
		os.Symlink(e.v.File, filepath.Join(e.p.stateDir, "instance.json"))
	}, nil},
}

// TestHostileState plants each hostile input where reaper keeps or finds its state, in both
// containment modes, next to a live instance whose session runs, and checks that reaper ps and
// reaper sweep (dry run and real) end, stay within maxRSS, print nothing of the victim's and no
// terminal escape, touch neither the victim nor the live instance, and report what they left alone.
// Then it checks that a reaper starting there sweeps, serves and ends clean.
func TestHostileState(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: planting devices and other users' files needs root")
	}
	for _, mode := range []string{"cgroup", "process"} {
		t.Run(mode, func(t *testing.T) {
			p := place(t, mode)
			e := &hostileEnv{p: p}
			if mode == "cgroup" {
				e.mount = cgroup.Detect(cgroup.Options{}).Mountpoint
				own, _ := os.ReadFile("/proc/self/cgroup")
				for _, line := range strings.Split(string(own), "\n") {
					if cg, ok := strings.CutPrefix(line, "0::"); ok {
						e.ownCg = filepath.Join(e.mount, cg)
					}
				}
			}
			e.v = testutil.NewVictim(t, e.mount)
			live := startHTTP(t, p.args()...)
			liveCs := live.connect(t)
			_, livePs := hostile(t, liveCs)
			if mode == "cgroup" {
				e.live = filepath.Join(p.root, "r"+strconv.Itoa(serverOf(t, live.cmd.Process.Pid))+"-")
				entries, _ := os.ReadDir(p.root)
				for _, de := range entries {
					if strings.HasPrefix(de.Name(), filepath.Base(e.live)) {
						e.live = filepath.Join(p.root, de.Name())
					}
				}
			}
			for _, c := range hostileCases {
				if c.cgroup && mode != "cgroup" {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					e.wrap, e.remove = nil, nil
					c.plant(t, e)
					rep := lookAndSweep(t, p, e.v, e.wrap...)
					if c.check != nil {
						c.check(t, e, rep)
					}
					e.v.Check(t)
					if alive := testutil.Alive(livePs); len(alive) != len(livePs) {
						t.Fatalf("the live instance's processes were touched: %v of %v alive", alive, livePs)
					}
					clearPlanted(t, p, live, e.remove)
				})
			}
			if r := bash(t, liveCs, "echo ok"); r.Output != "ok\n" {
				t.Errorf("the live instance no longer serves: %+v", r)
			}
			t.Run("a reaper starting among them", func(t *testing.T) {
				forged(func(e *hostileEnv) string { return e.v.Cgroup })(t, e)
				other := instanceDir(t, p, "r4194301-7")
				record(t, other, "r4194301-7", "")
				os.Mkdir(filepath.Join(other, "s-1"), 0o700)
				unix.Mkfifo(filepath.Join(other, "s-1", "session.json"), 0o600)
				unix.Mkfifo(filepath.Join(p.stateDir, "fifo"), 0o600)
				os.Symlink(e.v.Dir, filepath.Join(p.stateDir, "reaper-r4194302-7"))
				r := startHTTP(t, p.args()...)
				cs := r.connect(t)
				if res := bash(t, cs, "echo ok"); res.Output != "ok\n" {
					t.Errorf("the new instance does not serve: %+v", res)
				}
				if !r.stderr.Await("left alone") {
					t.Errorf("the start-up sweep did not log what it left alone:\n%s", r.stderr)
				}
				cs.Close()
				r.stop(t)
				e.v.Check(t)
				clearPlanted(t, p, live, nil)
			})
		})
	}
}

// clearPlanted removes what a case planted: everything in the state directory but the live
// instance's, and the cgroups it made.
func clearPlanted(t testing.TB, p placement, live *reaperProc, cgroups []string) {
	t.Helper()
	liveName := "reaper-r" + strconv.Itoa(serverOf(t, live.cmd.Process.Pid)) + "-"
	entries, _ := os.ReadDir(p.stateDir)
	for _, de := range entries {
		if !strings.HasPrefix(de.Name(), liveName) {
			path := filepath.Join(p.stateDir, de.Name())
			os.Chown(path, 0, 0)
			if err := os.RemoveAll(path); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	}
	for _, dir := range cgroups {
		if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// TestHostileStateDirectory: a state directory that others could change is refused by reaper serve,
// naming it and why, and neither reaper sweep nor reaper ps acts on a record planted there; the
// cgroup root is still looked at.
func TestHostileStateDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root (other users' directories)")
	}
	mount := cgroup.Detect(cgroup.Options{}).Mountpoint
	for _, c := range []struct {
		name string
		make func(t *testing.T, dir string) string // returns the --state-dir to give
		want string
	}{
		{"world-writable (/dev/shm as it was)", func(t *testing.T, dir string) string { os.Chmod(dir, 0o1777); return dir }, "writable by others"},
		{"group-writable", func(t *testing.T, dir string) string { os.Chmod(dir, 0o770); return dir }, "writable by others"},
		{"another user's", func(t *testing.T, dir string) string { os.Chown(dir, 65534, 65534); return dir }, "owned by another user"},
		{"a link", func(t *testing.T, dir string) string {
			link := filepath.Join(filepath.Dir(dir), "link")
			os.Symlink(dir, link)
			return link
		}, "symbolic link"},
		{"below a world-writable directory", func(t *testing.T, dir string) string {
			os.Chmod(filepath.Dir(dir), 0o777)
			return dir
		}, "writable by others"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "state")
			os.Mkdir(dir, 0o755)
			v := testutil.NewVictim(t, mount)
			idir := filepath.Join(dir, "reaper-"+deadName)
			os.Mkdir(idir, 0o700)
			record(t, idir, deadName, v.Cgroup)
			state := c.make(t, dir)
			p := placement{stateDir: state}
			if mount != "" {
				p.root = filepath.Join(mount, testutil.UniqueName("reaper-e2e-"))
			}
			t.Cleanup(func() { os.Chmod(base, 0o700) })
			out, code, _ := runBounded(t, nil, append([]string{"serve", "--http", "127.0.0.1:0"}, p.args()...)...)
			if code == 0 || !strings.Contains(out, c.want) || !strings.Contains(out, "state directory") {
				t.Errorf("reaper serve with that state directory: exit %d, want a refusal saying %q:\n%s", code, c.want, out)
			}
			lookAndSweep(t, p, v)
			v.Check(t)
			if _, err := os.Stat(filepath.Join(idir, "instance.json")); err != nil {
				t.Errorf("the planted record was removed: %v", err)
			}
			if p.root != "" {
				os.Remove(p.root)
			}
		})
	}
}

// TestTasksCannotSteerReaper: tasks, as root and as --user, try what a task can against reaper's
// state: a --user task cannot reach it at all; a root task can write there (a root task can do
// anything, see docs/security.md), but what it plants where reaper writes its session's record or
// removes its session's directory is replaced or removed, never written through or followed. Abuse of
// the working-directory pipe changes nothing but the session's working directory. Sessions end clean
// and in time.
func TestTasksCannotSteerReaper(t *testing.T) {
	tu := testutil.User(t)
	mount := cgroup.Detect(cgroup.Options{}).Mountpoint
	for _, mode := range []string{"cgroup", "process"} {
		for _, user := range []string{"root", tu.Name} {
			t.Run(mode+"/"+user, func(t *testing.T) {
				p := place(t, mode)
				m := mount
				if mode == "process" {
					m = ""
				}
				v := testutil.NewVictim(t, m)
				args := append(p.args(), "--grace", "1s")
				if user != "root" {
					args = append(args, "--user", user)
				}
				r := startHTTP(t, args...)
				cs := r.connect(t)
				sdir := filepath.Join(instanceState(t, p, r), "s-1")
				bash(t, cs, "true") // the session's directory exists once it ran something
				if user != "root" {
					out := bash(t, cs, "ls "+p.stateDir+" 2>&1; : > "+filepath.Join(sdir, "x")+" 2>&1; echo $?").Output
					if !strings.Contains(out, "Permission denied") || !strings.HasSuffix(out, "1\n") {
						t.Errorf("a --user task reached reaper's state: %q", out)
					}
				} else {
					// The record is rewritten at each command's start: through the link, or into the
					// FIFO, it would write the victim or block.
					bash(t, cs, "ln -sf "+v.File+" "+sdir+"/session.json")
					bash(t, cs, "echo next")
					bash(t, cs, "rm -f "+sdir+"/session.json; mkfifo "+sdir+"/session.json")
					start := time.Now()
					if res := bash(t, cs, "echo after"); res.Output != "after\n" || time.Since(start) > 5*time.Second {
						t.Errorf("a command after a FIFO was planted as the record: %+v after %v", res, time.Since(start))
					}
				}
				abuseCwdPipe(t, cs)
				pids, err := os.MkdirTemp("", "reaper-e2e-pids-")
				if err != nil {
					t.Fatal(err)
				}
				os.Chmod(pids, 0o777) // the tasks' user writes its pids there
				t.Cleanup(func() { os.RemoveAll(pids) })
				file, ps := hostileAt(t, cs, filepath.Join(pids, "pids"))
				start := time.Now()
				cs.Close() // DELETE
				testutil.AwaitDead(t, ps, 1*time.Second+3*time.Second)
				t.Logf("the session's processes were gone %v after its DELETE (grace 1 s)", time.Since(start).Round(time.Millisecond))
				if !r.stderr.Await("session ended") {
					t.Errorf("the session's end was not logged:\n%s", r.stderr)
				}
				t.Logf("its teardown was over %v after its DELETE", time.Since(start).Round(time.Millisecond))
				if left := survivors(t, file, ps); len(left) > 0 {
					t.Errorf("survivors: %v", left)
				}
				testutil.Eventually(t, "the session's directory to go", func() bool {
					_, err := os.Lstat(sdir)
					return os.IsNotExist(err)
				})
				t.Logf("and its directory %v after it", time.Since(start).Round(time.Millisecond))
				r.stop(t)
				v.Check(t)
				assertNothingLeft(t, p)
			})
		}
	}
}

// instanceState returns the state directory of the instance r (in p's state directory).
func instanceState(t testing.TB, p placement, r *reaperProc) string {
	t.Helper()
	prefix := "reaper-r" + strconv.Itoa(serverOf(t, r.cmd.Process.Pid)) + "-"
	entries, _ := os.ReadDir(p.stateDir)
	for _, de := range entries {
		if strings.HasPrefix(de.Name(), prefix) {
			return filepath.Join(p.stateDir, de.Name())
		}
	}
	t.Fatalf("no state directory %s* in %s", prefix, p.stateDir)
	return ""
}

// abuseCwdPipe writes into the pipe the working directory comes back through: garbage until it is
// full, a record of the task's own, and nothing after closing it. Each changes nothing but the
// session's working directory, and no call hangs.
func abuseCwdPipe(t testing.TB, cs *mcp.ClientSession) {
	t.Helper()
	// The pipe the working directory comes back through: garbage, a fake record, a full
	// pipe, a closed descriptor. A full pipe loses the record, and the directory stays (the pipe
	// is filled in the foreground, through the shell's own non-blocking descriptor, so that it is
	// full when the shell exits, however slow the machine); a fake
	// record is followed by the shell's own, since clearing the EXIT trap puts reaper's back (and a
	// task may choose its next directory anyway); closing the descriptor after the exec's record
	// loses what the command did after it.
	bash(t, cs, "cd /tmp")
	for _, c := range []struct{ command, want string }{
		{`head -c 70000 /dev/urandom >&97 2>/dev/null; cd /`, "/tmp"},
		{`printf '/etc\n\0' >/dev/fd/97; trap - EXIT`, "/tmp"},
		{`cd /etc; exec 97>&-; cd /usr`, "/etc"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		bashCtx(t, ctx, cs, c.command)
		cancel()
		if got := strings.TrimSpace(bash(t, cs, "pwd").Output); got != c.want {
			t.Errorf("after %q the working directory is %q, want %q", c.command, got, c.want)
		}
	}
}

// nasty starts, in a session, processes that make an end hard besides those of hostileAt: a leftover
// that writes into the output pipe as fast as it can, one that holds the working-directory pipe, one
// stopped by SIGSTOP, one in a user namespace of its own, one that ignores every signal it can. They
// write their pids into dir (which the tasks' user can write). It returns them all.
func nasty(t testing.TB, cs *mcp.ClientSession, dir string) []testutil.Proc {
	t.Helper()
	_, ps := hostileAt(t, cs, filepath.Join(dir, "pids"))
	f := filepath.Join(dir, "more")
	// yes floods the output only once the pids are printed (G exists): printed after it began, on a
	// loaded machine, they could fall in the middle the result leaves out.
	script := strings.NewReplacer("F", f, "G", f+".go").Replace(`
sh -c 'echo $$ >> F; while [ ! -e G ]; do sleep 0.05; done; exec yes' &
sh -c 'echo $$ >> F; exec sleep 1000' >>/dev/fd/97 &
sh -c 'echo $$ >> F; kill -STOP $$' &
sh -c 'trap "" HUP INT QUIT TERM USR1 USR2 ALRM; echo $$ >> F; while :; do sleep 1; done' &
if unshare -U true 2>/dev/null; then unshare -U sh -c 'echo $$ >> F; exec sleep 1000' & else sh -c 'echo $$ >> F; exec sleep 1000' & fi
`) + testutil.AwaitLines(f, 5) + "; " + testutil.ShowNS + "; : > '" + f + ".go'"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": script}})
	if err != nil {
		t.Fatal(err)
	}
	var out bashResult
	decode(t, res, &out)
	more := testutil.PidsIn(t, numericLines(out.Output)+" "+testutil.NSIn(out.Output))
	if len(more) != 5 {
		t.Fatalf("want 5 more pids, got %v", more)
	}
	return append(ps, more...)
}

// numericLines returns the lines of s that are numbers (yes's "y" lines and any note of dropped
// output are not).
func numericLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if _, err := strconv.Atoi(l); err == nil {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestNoWaitATaskCanHold: whatever its tasks do (ignore SIGTERM and fork on it, leave the session,
// write as fast as they can into the output pipe, hold the pipes, stop themselves, sit in a user
// namespace), a session ends within its grace period and a second of its DELETE, and reaper exits
// within 3 s of a second signal (its grace period being a minute), with nothing left, in both
// containment modes, tasks running as root and as --user.
func TestNoWaitATaskCanHold(t *testing.T) {
	tu := testutil.User(t)
	const grace = 2 * time.Second
	for _, mode := range []string{"cgroup", "process"} {
		for _, user := range []string{"root", tu.Name} {
			t.Run(mode+"/"+user, func(t *testing.T) {
				dir, err := os.MkdirTemp("", "reaper-e2e-pids-")
				if err != nil {
					t.Fatal(err)
				}
				os.Chmod(dir, 0o777)
				t.Cleanup(func() { os.RemoveAll(dir) })
				userArgs := []string{}
				if user != "root" {
					userArgs = []string{"--user", user}
				}

				p := place(t, mode)
				r := startHTTP(t, append(append(p.args(), "--grace", grace.String()), userArgs...)...)
				cs := r.connect(t)
				ps := nasty(t, cs, dir)
				start := time.Now()
				cs.Close() // DELETE
				testutil.AwaitDead(t, ps, grace+time.Second)
				t.Logf("a session's end: all %d processes gone %v after its DELETE (grace %v)", len(ps), time.Since(start).Round(time.Millisecond), grace)
				if !r.stderr.Await("session ended") {
					t.Errorf("the session's end was not logged:\n%s", r.stderr)
				}
				if took := time.Since(start); took > grace+2*time.Second {
					t.Errorf("the session's teardown took %v", took)
				} else {
					t.Logf("and its teardown was over after %v", took.Round(time.Millisecond))
				}
				if left := survivors(t, filepath.Join(dir, "pids"), ps); len(left) > 0 {
					t.Errorf("survivors: %v", left)
				}
				if res := bash(t, r.connect(t), "echo ok"); res.Output != "ok\n" {
					t.Errorf("reaper no longer serves: %+v", res)
				}
				if !raceEnabled {
					if _, peak := rss(t, serverOf(t, r.cmd.Process.Pid)); peak > maxRSS {
						t.Errorf("the server peaked at %d MiB", peak>>20)
					}
				}
				r.stop(t)

				os.Remove(filepath.Join(dir, "pids"))
				os.Remove(filepath.Join(dir, "more"))
				os.Remove(filepath.Join(dir, "more.go"))
				p = place(t, mode)
				r = startHTTP(t, append(append(p.args(), "--grace", "1m"), userArgs...)...)
				ps = nasty(t, r.connect(t), dir)
				r.cmd.Process.Signal(syscall.SIGTERM)
				// The first signal's teardown under way, as the server says: a second SIGTERM sent
				// sooner could be merged with the first by the kernel while the guard or the server
				// waits to be scheduled (a loaded machine), and the 1-minute grace would then run.
				if !r.stderr.Await("shutting down") {
					t.Fatalf("the server did not log the first SIGTERM\n%s", r.stderr)
				}
				r.cmd.Process.Signal(syscall.SIGTERM)
				second := time.Now()
				select {
				case <-r.done:
					t.Logf("reaper exited %v after a second signal", time.Since(second).Round(time.Millisecond))
				case <-time.After(3 * time.Second):
					t.Errorf("reaper had not exited 3 s after a second signal\n%s", r.stderr)
				}
				testutil.AwaitDead(t, ps, killedWait)
				<-r.done
				assertNothingLeft(t, p)
			})
		}
	}
}

// bashCtx runs a command that may fail, with ctx's deadline; it fails the test only if the call
// does not return.
func bashCtx(t testing.TB, ctx context.Context, cs *mcp.ClientSession, command string) {
	t.Helper()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}}); err != nil {
		t.Errorf("bash %q: %v", command, err)
	}
}
