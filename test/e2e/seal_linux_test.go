package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The cross-session matrix of docs/security.md, against the real binary: in each containment mode,
// with PID namespaces on (with and without --private-tmp) and off, with tasks as root and as a user
// of their own (--user), a hostile task of session A goes after session B of the same server and
// identity. Each attack is a row; what the docs say holds in a mode must hold, and what they say
// does not must not (an attack that stops working is a change the docs must say).
//
//	row       the attack from A                                    holds
//	terminal  open B's /dev/pts/N, write into it, resize it            with PID namespaces
//	signal    kill -0 a process of B by its pid                        with PID namespaces
//	environ   read B's /proc/<pid>/environ                             with PID namespaces
//	cmdline   read B's /proc/<pid>/cmdline                             with PID namespaces
//	fd        list B's /proc/<pid>/fd                                  with PID namespaces
//	tmp       read B's file in /tmp                                    with --private-tmp
//	shm       read B's file in /dev/shm                                with --private-tmp
//	abstract  connect to B's abstract unix socket                      never (one network namespace)
//	sysv      see B's System V message queue (ipcs)                    with PID namespaces (an IPC namespace)
//	output    read B's output file in reaper's state                   with --user (root reads anything)
//	unmount   as root: unmount its /proc, then read B's environ        never (root undoes its mounts)
//
// And what ends with B: its /tmp and /dev/shm files with --private-tmp (they were never the host's),
// its message queue with PID namespaces.

// sealMode is a column of the matrix.
type sealMode struct {
	containment, pidns string
	user, privateTmp   bool
}

func (m sealMode) String() string {
	s := m.containment + "/pidns-" + m.pidns
	if m.privateTmp {
		s += "/private-tmp"
	}
	if m.user {
		return s + "/user"
	}
	return s + "/root"
}

// holds says whether the docs say the row's seal holds in the mode.
func (m sealMode) holds(row string) bool {
	ns := m.pidns == "on"
	switch row {
	case "terminal", "signal", "environ", "cmdline", "fd", "sysv":
		return ns
	case "tmp", "shm":
		return m.privateTmp
	case "output":
		return m.user
	}
	return false // abstract, unmount
}

// TestSessionsSealed runs the matrix.
func TestSessionsSealed(t *testing.T) {
	tu := testutil.User(t) // first: removed after the reapers below have stopped
	var modes []sealMode
	for _, c := range []string{"cgroup", "process"} {
		for _, user := range []bool{false, true} {
			modes = append(modes, sealMode{c, "off", user, false}, sealMode{c, "on", user, false}, sealMode{c, "on", user, true})
		}
	}
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			if m.pidns == "on" {
				needPIDNamespaces(t)
			}
			sealMatrix(t, m, tu)
		})
	}
}

// sealVictim is what session B holds, as the test learned it.
type sealVictim struct {
	tty, ttyTask  string // its terminal's name (as B sees it) and the task on it
	pid           int    // a process of B, as the host sees it
	queueKey      string // its message queue's key, as ipcs prints it
	outputFile    string // a command's output file
	tmp, shm      string // its files in /tmp and /dev/shm
	abstract      string // its abstract socket's name, "" without python3
	nonce, secret string
}

// sealMatrix runs the attacks of one mode.
func sealMatrix(t *testing.T, m sealMode, tu testutil.TestUser) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("client tok-seal\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The state directory where reaper keeps it by default (/run/reaper for root), not below /tmp:
	// with a private /tmp no task would see it at all, which says nothing of its own protection.
	pl := place(t, m.containment)
	state, err := os.MkdirTemp(filepath.Dir(instance.DefaultStateDir()), "reaper-seal-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	pl.stateDir = state
	args := append(pl.args(), "--pid-namespace", m.pidns, "--token-file", tokens)
	if m.user {
		args = append(args, "--user", tu.Name)
	}
	if m.privateTmp {
		args = append(args, "--private-tmp")
	}
	// Sessions start in /: a checkout may be below /tmp (CI's is), where a private /tmp would hide
	// the working directory, which reaper refuses.
	cmd := reaperCmd(append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Dir = "/"
	p := startCmd(t, cmd, nil, nil)
	p.awaitServing(t)
	a, b := connectHTTP(t, p.url, "tok-seal"), connectHTTP(t, p.url, "tok-seal")
	v := sealVictimIn(t, b)
	t.Cleanup(func() { // what the host keeps where the seals do not hold
		os.Remove(v.tmp)
		os.Remove(v.shm)
		if v.queueKey != "" {
			exec.Command("ipcrm", "-Q", v.queueKey).Run()
		}
	})
	// A's own terminal: with PID namespaces, the name B's terminal has in B's instance names this
	// one in A's, which A may open as it likes.
	bash(t, a, "exec sleep 1000", "tty", true, "run_in_background", true)
	got := sealAttacks(t, a, v, m)
	for row, reached := range got {
		if row == "terminal" {
			continue // whether it reached B, B's terminal says (below)
		}
		if holds := m.holds(row); reached == holds {
			t.Errorf("%s: the attack from another session %s, but docs/security.md says the seal %s",
				row, map[bool]string{true: "succeeded", false: "failed"}[reached], map[bool]string{true: "holds", false: "does not hold"}[holds])
		}
	}
	// The terminal, seen from B: the text A wrote and the resize reached it exactly where the seal
	// does not hold.
	_, out := taskOutput(t, b, v.ttyTask, false)
	if !m.holds("terminal") {
		testutil.Eventually(t, "A's text and resize on B's terminal", func() bool {
			_, more := taskOutput(t, b, v.ttyTask, false)
			out += more
			return strings.Contains(out, "injected-"+v.nonce) && strings.Contains(out, "winch")
		})
	} else if time.Sleep(300 * time.Millisecond); strings.Contains(out, v.nonce) || strings.Contains(out, "winch") {
		t.Errorf("B's terminal saw A's text or resize:\n%s", out)
	}

	// B ends: what goes with it.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "B's processes gone", func() bool { return !running(v.pid) })
	for _, f := range []string{v.tmp, v.shm} {
		_, err := os.Lstat(f)
		if left := err == nil; left == m.privateTmp {
			t.Errorf("%s on the host after B ended: %v (private /tmp: %v)", f, err, m.privateTmp)
		}
	}
	ipcs, _ := exec.Command("ipcs", "-q").Output()
	if left := bytes.Contains(ipcs, []byte(v.queueKey)); left == (m.pidns == "on") {
		t.Errorf("B's message queue %s on the host after B ended: %v (PID namespaces %s)", v.queueKey, left, m.pidns)
	}
}

// sealVictimIn sets session B up: a task on a terminal that reports resizes, a long-lived process, a
// message queue, a command's output file, files in /tmp and /dev/shm, an abstract socket.
func sealVictimIn(t *testing.T, b *mcp.ClientSession) sealVictim {
	t.Helper()
	v := sealVictim{nonce: strconv.FormatInt(time.Now().UnixNano()%1e9, 10)}
	v.secret = "secret-" + v.nonce
	v.tmp, v.shm = "/tmp/reaper-seal-"+v.nonce, "/dev/shm/reaper-seal-"+v.nonce
	v.ttyTask = bash(t, b, `tty; trap 'echo winch' WINCH; while :; do sleep 0.1; done`, "tty", true, "run_in_background", true).TaskID
	testutil.Eventually(t, "B's terminal's name", func() bool {
		_, out := taskOutput(t, b, v.ttyTask, false)
		v.tty += out
		return strings.Contains(v.tty, "\n")
	})
	if v.tty = strings.TrimSpace(v.tty); !strings.HasPrefix(v.tty, "/dev/pts/") {
		t.Fatalf("B's terminal is none of its /dev/pts: tty printed %q", v.tty)
	}
	sleep := "9" + fmt.Sprintf("%08d", time.Now().UnixNano()%1e8) // a duration no other process sleeps
	bash(t, b, "exec sleep "+sleep, "run_in_background", true)
	testutil.Eventually(t, "B's sleep", func() bool {
		v.pid = pidOfArgv("sleep", sleep)
		return v.pid > 0
	})
	r := bash(t, b, `echo `+v.secret+` | tee `+v.tmp+` `+v.shm+`; id=$(ipcmk -Q | grep -o '[0-9]*$'); ipcs -q | awk -v id="$id" '$2 == id { print $1 }'`)
	lines := strings.Fields(r.Output)
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "0x") || r.OutputFile == "" {
		t.Fatalf("B's setup printed %q (output file %q)", r.Output, r.OutputFile)
	}
	v.queueKey, v.outputFile = lines[1], r.OutputFile
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		v.abstract = "reaper-seal-" + v.nonce
		bash(t, b, `exec /usr/bin/python3 -c 'import socket, time; s = socket.socket(socket.AF_UNIX); s.bind("\0`+v.abstract+`"); s.listen(); time.sleep(1000)'`, "run_in_background", true)
		testutil.Eventually(t, "B's abstract socket", func() bool {
			b, _ := os.ReadFile("/proc/net/unix")
			return bytes.Contains(b, []byte("@"+v.abstract))
		})
	}
	return v
}

// sealAttacks runs every attack from A in one command and returns, by row, whether it reached B.
func sealAttacks(t *testing.T, a *mcp.ClientSession, v sealVictim, m sealMode) map[string]bool {
	t.Helper()
	pid := strconv.Itoa(v.pid)
	script := `try() { row=$1; shift; if "$@" >/dev/null 2>&1; then echo "$row=reached"; else echo "$row=refused"; fi; }
try terminal sh -c 'exec 3<>` + v.tty + ` && echo injected-` + v.nonce + ` >&3 && stty -F ` + v.tty + ` cols 33 rows 11'
try signal kill -0 ` + pid + `
try environ grep -q REAPER_SESSION /proc/` + pid + `/environ
try cmdline grep -q sleep /proc/` + pid + `/cmdline
try fd ls /proc/` + pid + `/fd/0
try tmp grep -q ` + v.secret + ` ` + v.tmp + `
try shm grep -q ` + v.secret + ` ` + v.shm + `
try sysv sh -c 'ipcs -q | grep -q ` + v.queueKey + `'
try output grep -q ` + v.secret + ` ` + v.outputFile + `
`
	if v.abstract != "" {
		script += `try abstract /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect("\0` + v.abstract + `")'
`
	}
	if !m.user && m.pidns == "on" {
		script += `try unmount sh -c 'umount -l /proc && grep -q REAPER_SESSION /proc/` + pid + `/environ'
`
	}
	r := bash(t, a, script)
	got := make(map[string]bool)
	for _, line := range strings.Fields(r.Output) {
		row, res, ok := strings.Cut(line, "=")
		if !ok || res != "reached" && res != "refused" {
			t.Fatalf("A's attacks printed %q", r.Output)
		}
		got[row] = res == "reached"
	}
	if len(got) < 9 {
		t.Fatalf("A's attacks printed %q", r.Output)
	}
	return got
}

// pidOfArgv returns the pid of the process whose command line is exactly argv, or 0.
func pidOfArgv(argv ...string) int {
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if b, _ := os.ReadFile(d + "/cmdline"); bytes.Equal(b, want) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	return 0
}

// running reports whether pid names a process that has not ended (a zombie has).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}
