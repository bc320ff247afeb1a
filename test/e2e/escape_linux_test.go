package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// rootProcs is the cgroup.procs file of the cgroup2 hierarchy's top, where an escapee moves itself.
func rootProcs(t testing.TB) string {
	t.Helper()
	info := cgroup.Detect(cgroup.Options{})
	if info.Mountpoint == "" || os.Geteuid() != 0 {
		t.Skipf("skipped: an escapee moving itself out of its cgroup needs root and cgroup2: %s", info)
	}
	return filepath.Join(info.Mountpoint, "cgroup.procs")
}

// escapeScript clears the environment, double-forks, starts a new session and moves itself into the
// cgroup2 hierarchy's top: every trail a teardown follows is gone. The escapee writes its pid to $2.
const escapeScript = `env -i /bin/sh -c 'setsid /bin/sh -c "echo 0 > \"\$1\" 2>/dev/null; /bin/sh -c \"echo \\\$\\\$ >> \$2; exec sleep 1000\" &" _ "$1" "$2" &' _ %s %s`

// TestEscapeesDieWithTheirSession: a process that left every trail (environment, parent chain,
// session, cgroup) dies by its session's end at the latest, in both containment modes, and the
// processes of another session that lives on are untouched: a leftover, and a child that cleared its
// environment but still has its parent.
func TestEscapeesDieWithTheirSession(t *testing.T) {
	procs := rootProcs(t)
	for _, mode := range []string{"cgroup", "process"} {
		t.Run(mode, func(t *testing.T) {
			p := startHTTP(t, append(place(t, mode).args(), "--grace", grace.String())...)
			a, b := p.connect(t), p.connect(t)
			dir := t.TempDir()
			keep := filepath.Join(dir, "keep")
			bash(t, b, "sleep 1000 & echo $! $("+testutil.ShowNS+") >> "+keep)
			bg := bash(t, b, "env -i sleep 1000 & echo $! $("+testutil.ShowNS+") >> "+keep+"; wait", "run_in_background", true)
			if bg.TaskID == "" {
				t.Fatalf("no task: %+v", bg)
			}
			var kept []testutil.Proc
			testutil.Eventually(t, "session b's processes", func() bool {
				b, _ := os.ReadFile(keep)
				if strings.Count(string(b), "\n") < 2 {
					return false
				}
				kept = testutil.PidsIn(t, string(b))
				return true
			})
			f := filepath.Join(dir, "escapee")
			bash(t, a, shellf(escapeScript, procs, f)+"; "+testutil.AwaitLines(f, 1)+"; "+testutil.ShowNS+" >> "+f)
			escapee := pidFromFile(t, f)
			server := serverOf(t, p.cmd.Process.Pid)
			testutil.Eventually(t, "the escapee to lose its parent and be adopted by reaper or its session's init", func() bool {
				return adoptedByReaper(escapee.Pid, server)
			})
			if env, _ := os.ReadFile("/proc/" + strconv.Itoa(escapee.Pid) + "/environ"); bytes.Contains(env, []byte("REAPER_")) {
				t.Fatalf("the escapee %d kept a marker: %q", escapee.Pid, env)
			}
			a.Close() // DELETE: session a ends
			took := testutil.AwaitDead(t, []testutil.Proc{escapee}, grace+5*time.Second)
			t.Logf("the escapee died %v after its session's DELETE", took)
			if alive := testutil.Alive(kept); len(alive) != len(kept) {
				t.Errorf("session b's processes died with a: %d of %d left", len(alive), len(kept))
			}
			if r := bash(t, b, "echo b lives"); r.Output != "b lives\n" {
				t.Errorf("session b: %+v", r)
			}
		})
	}
}

// TestBuriedMarker: a process whose marker sits behind 4 MB of other variables, which has lost its
// parent and its session, is recognised as its session's: another session's end leaves it alone, its
// session's listing shows it, and its session's end kills it.
func TestBuriedMarker(t *testing.T) {
	for _, mode := range []string{"cgroup", "process"} {
		t.Run(mode, func(t *testing.T) {
			p := startHTTP(t, append(place(t, mode).args(), "--grace", grace.String())...)
			a, b := p.connect(t), p.connect(t)
			bash(t, b, "true")
			f := filepath.Join(t.TempDir(), "buried")
			bash(t, a, `ulimit -s 65536; big=$(head -c 100000 /dev/zero | tr '\0' x); set --; for i in $(seq 40); do set -- "$@" "B$i=$big"; done; `+
				`env -i "$@" REAPER_TASK=$REAPER_TASK REAPER_SESSION=$REAPER_SESSION setsid -f /bin/sh -c 'echo $$ $(`+testutil.ShowNS+`) > `+f+`; exec sleep 1000'; `+testutil.AwaitLines(f, 1))
			buried := pidFromFile(t, f)
			// It wrote its pid before exec'ing sleep; read mid-exec, /proc/<pid>/environ is empty.
			testutil.Eventually(t, "the buried process to exec sleep", func() bool {
				comm, _ := os.ReadFile("/proc/" + strconv.Itoa(buried.Pid) + "/comm")
				return string(comm) == "sleep\n"
			})
			env, _ := os.ReadFile("/proc/" + strconv.Itoa(buried.Pid) + "/environ")
			if at := bytes.Index(env, []byte("REAPER_SESSION=")); at < 4_000_000 {
				t.Fatalf("the marker is at byte %d of %d: not buried", at, len(env))
			}
			b.Close()               // another session ends
			time.Sleep(time.Second) // not readiness: b's teardown is over, and a's process must not have died with it
			if !testutil.Running(buried) {
				t.Fatal("the process with a buried marker died with another session")
			}
			// The listing gives pids as the session sees them: what the process wrote as $$.
			written, _ := os.ReadFile(f)
			seen := strings.Fields(string(written))[0]
			res := callTool(t, a, "task_list", nil)
			if !strings.Contains(textOf(res), "pids ["+seen+"]") {
				t.Errorf("session a's listing does not show %s (host pid %d):\n%s", seen, buried.Pid, textOf(res))
			}
			a.Close()
			testutil.AwaitDead(t, []testutil.Proc{buried}, grace+5*time.Second)
		})
	}
}

// TestMovedIntoAnotherSessionsSlice: a task of session a moves a process into a leaf of session b.
// It belongs to the session that started it, by its marker and ancestry, and it also dies with any
// session whose cgroup it sits in; listings show it where it runs (b's). One that also cleared its
// marker and lost its parent: without PID namespaces it can no longer be told to be a's, so it lives
// on in b and dies with b; with them it is still in a's namespace, and dies with a.
func TestMovedIntoAnotherSessionsSlice(t *testing.T) {
	for _, ns := range []string{"off", "on"} {
		t.Run("pid-namespace-"+ns, func(t *testing.T) {
			if ns == "on" {
				needPIDNamespaces(t)
			}
			movedIntoAnotherSessionsSlice(t, ns)
		})
	}
}

func movedIntoAnotherSessionsSlice(t *testing.T, ns string) {
	pl := place(t, "cgroup")
	p := startHTTP(t, append(pl.args(), "--grace", grace.String(), "--pid-namespace", ns)...)
	mount := cgroup.Detect(cgroup.Options{}).Mountpoint
	a, b := p.connect(t), p.connect(t)
	dir := t.TempDir()
	held := filepath.Join(dir, "held")
	task := bash(t, b, `grep '^0::' /proc/self/cgroup | cut -c4- > `+held+`; exec sleep 1000`, "run_in_background", true)
	testutil.Eventually(t, "b's task to name its cgroup", func() bool {
		b, _ := os.ReadFile(held)
		return strings.HasSuffix(string(b), "\n")
	})
	rel, _ := os.ReadFile(held)
	leafProcs := filepath.Join(mount, strings.TrimSpace(string(rel)), "cgroup.procs")
	marked, scrubbed := filepath.Join(dir, "marked"), filepath.Join(dir, "scrubbed")
	bash(t, a, shellf("export LEAF=%s M=%s S=%s; ", leafProcs, marked, scrubbed)+
		`sh -c 'sh -c "echo \$\$ > \$LEAF; echo \$\$ \$(readlink /proc/\$\$/ns/pid) > \$M; exec sleep 1000" &'; `+
		`env -i LEAF="$LEAF" S="$S" /bin/sh -c 'sh -c "echo \$\$ > \$LEAF; echo \$\$ \$(readlink /proc/\$\$/ns/pid) > \$S; exec sleep 1000" &'; `+
		testutil.AwaitLines(marked, 1)+"; "+testutil.AwaitLines(scrubbed, 1))
	m, s := pidFromFile(t, marked), pidFromFile(t, scrubbed)
	for _, pr := range []testutil.Proc{m, s} {
		if cg, _ := os.ReadFile("/proc/" + strconv.Itoa(pr.Pid) + "/cgroup"); !strings.Contains(string(cg), strings.TrimSpace(string(rel))) {
			t.Fatalf("%d did not move into b's leaf: %s", pr.Pid, cg)
		}
	}
	var list struct {
		Tasks []struct {
			TaskID    string `json:"task_id"`
			Processes int    `json:"processes"`
		} `json:"tasks"`
	}
	decode(t, callTool(t, b, "task_list", nil), &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != task.TaskID || list.Tasks[0].Processes != 3 {
		t.Errorf("b's listing %+v: want its task with its own process and the two moved in", list.Tasks)
	}
	a.Close()
	if ns == "on" {
		testutil.AwaitDead(t, []testutil.Proc{m, s}, grace+5*time.Second)
		return
	}
	testutil.AwaitDead(t, []testutil.Proc{m}, grace+5*time.Second)
	time.Sleep(500 * time.Millisecond) // not readiness: the scrubbed one must outlive a's teardown
	if !testutil.Running(s) {
		t.Error("the process that cleared its marker in b's leaf died with a")
	}
	b.Close()
	testutil.AwaitDead(t, []testutil.Proc{s}, grace+5*time.Second)
}

// shellf formats a command line, quoting each argument for the shell.
func shellf(format string, args ...string) string {
	q := make([]any, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return fmt.Sprintf(format, q...)
}

// hopperScript runs chains of processes that keep changing pid: each forks its successor and exits,
// so no pid a walk reads lives long. Four chains stay in the task's session and process group and
// four start sessions of their own; every process ignores SIGTERM, SIGHUP and SIGINT. The task itself
// ends in a sleep. $HOPTAG, set by the caller, is in every chain's environment: bash forks the chains
// without exec, and /proc/<pid>/environ shows what the last exec was given.
const hopperScript = `trap '' TERM HUP INT
h() { (trap '' TERM HUP INT; h &); exit 0; }
for i in 1 2 3 4; do
	(h &)
	(setsid bash -c "trap '' TERM HUP INT; $(declare -f h); h" &)
done
exec sleep 1000
`

// TestPidHoppersDieWithTheirSession: processes that fork their successor and exit, faster than any
// walk of /proc can follow them one by one, die with their session in each containment mode, with
// and without a PID namespace: the slice's kill, the namespace's end or, in process containment
// without one, the check for escapees, which looks again until a look finds no trace of a chain (a
// chain's processes become reaper's children as they hop). Another session lives on.
func TestPidHoppersDieWithTheirSession(t *testing.T) {
	eachModeAndNamespace(t, pidHoppers)
}

func pidHoppers(t *testing.T, pl placement, ns string) {
	p := startHTTP(t, append(pl.args(), "--grace", grace.String(), "--pid-namespace", ns)...)
	a, b := p.connect(t), p.connect(t)
	bash(t, b, "true")
	tag := testutil.UniqueName("hop-")
	t.Cleanup(func() { killTagged(t, tag) })
	script := filepath.Join(t.TempDir(), "hop.sh")
	if err := os.WriteFile(script, []byte(hopperScript), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := bash(t, a, "HOPTAG="+tag+" exec bash "+script, "run_in_background", true); r.TaskID == "" {
		t.Fatalf("no task: %+v", r)
	}
	// Hopping: pids seen once are gone and new ones have come.
	var first map[int]bool
	testutil.Eventually(t, "the chains to hop", func() bool {
		now := tagged(tag)
		if first == nil {
			if len(now) >= 8 {
				first = now
			}
			return false
		}
		gone, came := false, false
		for pid := range first {
			gone = gone || !now[pid]
		}
		for pid := range now {
			came = came || !first[pid]
		}
		return gone && came
	})
	a.Close() // DELETE: session a ends
	if !p.stderr.Await("session ended") {
		t.Fatalf("no end of session a logged:\n%s", p.stderr)
	}
	// Once the teardown is over, every process of the chains is dead or has SIGKILL pending; a chain
	// it missed hops on (in process containment, until reaper exits). A scan of /proc
	// can miss a chain between its fork and its parent's exit: two scans, and what both found alive
	// and not doomed is left.
	running := func() map[int]bool {
		m := tagged(tag)
		maps.DeleteFunc(m, func(pid int, _ bool) bool { return testutil.KillPending(pid) })
		return m
	}
	left := running()
	maps.Copy(left, running())
	now := running()
	maps.DeleteFunc(left, func(pid int, _ bool) bool { return !now[pid] })
	if len(left) > 0 {
		t.Errorf("processes of the chains outlived their session's teardown: %v", slices.Sorted(maps.Keys(left)))
	}
	if r := bash(t, b, "echo b lives"); r.Output != "b lives\n" {
		t.Errorf("session b: %+v", r)
	}
}

// tagged returns the live processes whose environment holds HOPTAG=tag.
func tagged(tag string) map[int]bool {
	pids := map[int]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && hasTag(pid, tag) {
			pids[pid] = true
		}
	}
	return pids
}

// hasTag reports whether pid's environment holds HOPTAG=tag.
func hasTag(pid int, tag string) bool {
	env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return bytes.Contains(append([]byte{0}, env...), []byte("\x00HOPTAG="+tag+"\x00"))
}

// killTagged kills what is left of the chains that carry tag, which this test started: stopped
// first, so that none forks a successor while the others are killed, until none is left. Each is
// signalled through a pidfd opened before its tag is read again, so that a pid reused meanwhile by
// another process is left alone.
func killTagged(t testing.TB, tag string) {
	signal := func(sig unix.Signal) {
		for pid := range tagged(tag) {
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			if hasTag(pid, tag) {
				unix.PidfdSendSignal(fd, sig, nil, 0)
			}
			unix.Close(fd)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if len(tagged(tag)) == 0 {
			return
		}
		signal(unix.SIGSTOP)
		signal(unix.SIGKILL)
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("cleanup: processes tagged %s still alive", tag)
}
