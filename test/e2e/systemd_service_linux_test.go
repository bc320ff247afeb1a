package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// The shipped unit, run by systemd: only where systemd is PID 1 and the cgroup hierarchy is unified
// (the VM lane's guest b, test/vm). The unit runs under a unique name from /run/systemd/system, which
// a reboot forgets, with the binary under test copied where the unit's sandbox lets it run.

// needSystemd skips the test unless it runs as root on a host whose PID 1 is systemd with the unified
// cgroup hierarchy, with systemctl, journalctl and systemd-sysusers.
func needSystemd(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: running the systemd unit needs root")
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		t.Skip("skipped: systemd is not PID 1 here (no /run/systemd/system); test/vm runs this test in a guest where it is")
	}
	for _, tool := range []string{"systemctl", "journalctl", "systemd-sysusers"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s is not installed", tool)
		}
	}
	if b, _ := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); len(b) == 0 {
		t.Skip("skipped: the cgroup hierarchy is not unified (no cgroup2 at /sys/fs/cgroup): Delegate=yes gives reaper nothing it can use")
	}
}

// systemctl runs systemctl with args and fails the test if it fails.
func systemctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("systemctl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("systemctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// unitProperty returns one property of unit as systemctl show reads it.
func unitProperty(t *testing.T, unit, name string) string {
	t.Helper()
	return systemctl(t, "show", "--value", "-p", name, unit)
}

// reaperUser makes sure the unit's user exists, as its installation does (systemd-sysusers with the
// shipped file), and removes it again afterwards if it did not exist before.
func reaperUser(t *testing.T) {
	t.Helper()
	if _, err := exec.Command("getent", "passwd", "reaper").Output(); err == nil {
		return
	}
	conf, err := filepath.Abs("../../deploy/systemd/reaper-sysusers.conf")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-sysusers", conf).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers %s: %v\n%s", conf, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", "reaper").CombinedOutput(); err != nil {
			t.Errorf("cleanup: userdel reaper: %v\n%s", err, out)
		}
		exec.Command("groupdel", "reaper").Run() // gone with the user where it was the user's own
	})
}

// unitDirs are the directories the unit has systemd make for it (RuntimeDirectory=, StateDirectory=),
// which outlive it.
var unitDirs = []string{"/run/reaper", "/var/lib/reaper"}

// startUnit installs the shipped unit under a unique name, running the binary under test on a port
// of its choosing, starts it and returns its name, its MCP endpoint and the token its clients send
// (reaper's own: its start-up line in the journal names the file). Cleanup stops and removes it,
// and the directories it left.
func startUnit(t *testing.T) (unit, url, token string) {
	t.Helper()
	for _, dir := range unitDirs {
		if _, err := os.Stat(dir); err == nil {
			t.Skipf("skipped: %s exists: a reaper service is installed here, and the unit under test would share its directories", dir)
		}
	}
	t.Cleanup(func() {
		for _, dir := range unitDirs {
			os.RemoveAll(dir)
		}
	})
	reaperUser(t)
	// The unit's own view of the file system (PrivateTmp=, ProtectHome=) hides the test's
	// temporary directory: the binary goes under /run.
	dir, err := os.MkdirTemp("/run", "reaper-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe := filepath.Join(dir, "reaper")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	const listen = "--http 127.0.0.1:8765"
	if !strings.Contains(string(text), "ExecStart=/usr/local/bin/reaper serve "+listen) {
		t.Fatalf("%s: ExecStart does not start with reaper serve %s", unitPath, listen)
	}
	text = []byte(strings.NewReplacer("/usr/local/bin/reaper", exe, listen, "--http 127.0.0.1:0").Replace(string(text)))
	unit = testutil.UniqueName("reaper-e2e-") + ".service"
	path := filepath.Join("/run/systemd/system", unit)
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("systemctl", "stop", unit).Run()
		os.Remove(path)
		exec.Command("systemctl", "daemon-reload").Run()
		exec.Command("systemctl", "reset-failed", unit).Run()
	})
	systemctl(t, "daemon-reload")
	systemctl(t, "start", unit) // Type=notify: returns once reaper said READY=1
	var line map[string]string
	testutil.Eventually(t, "the unit's start-up line in the journal", func() bool {
		var ok bool
		line, ok = testutil.LogLine(journal(t, unit), testutil.ServingHTTP)
		return ok
	})
	if !strings.HasPrefix(line["containment"], "cgroup ") {
		t.Errorf("the unit runs reaper in %q, want cgroup containment (Delegate=yes)", line["containment"])
	}
	m := regexp.MustCompile(`reaper's own, in (/\S+) `).FindStringSubmatch(line["auth"])
	if m == nil {
		t.Fatalf("the start-up line names no token file: auth=%q", line["auth"])
	}
	b, err = os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return unit, line["url"], strings.TrimSpace(string(b))
}

// journal returns what unit logged, its messages alone.
func journal(t *testing.T, unit string) string {
	t.Helper()
	out, err := exec.Command("journalctl", "--no-pager", "-o", "cat", "-u", unit).Output()
	if err != nil {
		t.Fatalf("journalctl -u %s: %v", unit, err)
	}
	return string(out)
}

// unitProcs returns the processes in unit's cgroup and every cgroup below it.
func unitProcs(t *testing.T, unit string) []int {
	t.Helper()
	dir := filepath.Join("/sys/fs/cgroup", unitProperty(t, unit, "ControlGroup"))
	var pids []int
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if pid, err := strconv.Atoi(sc.Text()); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// TestSystemdServiceContains runs the shipped unit under systemd: Delegate=yes gives reaper cgroup
// containment as the unit's unprivileged user; a session's escapees live in the unit's cgroup; a
// DELETE kills them and leaves reaper's own processes alone in the unit; `systemctl stop` then
// ends another session's escapees with reaper, and leaves neither a process nor a cgroup.
func TestSystemdServiceContains(t *testing.T) {
	needSystemd(t)
	unit, url, token := startUnit(t)
	cgroupDir := unitProperty(t, unit, "ControlGroup")
	main, _ := strconv.Atoi(unitProperty(t, unit, "MainPID"))
	if uid, _ := testutil.StatusField(main, "Uid"); strings.Fields(uid)[0] == "0" {
		t.Errorf("reaper runs as root in the unit, want the reaper user: Uid %s", uid)
	}

	cs := connectHTTP(t, url, token)
	ps := escapees(t, cs)
	for _, p := range ps {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/cgroup")
		if !strings.HasPrefix(strings.TrimPrefix(strings.TrimSpace(string(b)), "0::"), cgroupDir+"/") {
			t.Errorf("escapee %d is in %s, outside the unit's cgroup %s", p.Pid, b, cgroupDir)
		}
	}
	cs.Close() // DELETE
	testutil.AwaitDead(t, ps, 30*time.Second)
	// Left in the unit: reaper's guard, its server, and the PID namespace init the server keeps ready
	// for the next session.
	server := serverOf(t, main)
	for deadline := time.Now().Add(testutil.Slow(30 * time.Second)); ; time.Sleep(10 * time.Millisecond) {
		var others []string
		for _, pid := range unitProcs(t, unit) {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			if pid != main && pid != server && (parentOf(pid) != server || strings.TrimSpace(string(comm)) != "reaper-init") {
				others = append(others, fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(string(comm))))
			}
		}
		if len(others) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the DELETE the unit still holds processes other than reaper's: %v", others)
		}
	}

	cs = connectHTTP(t, url, token)
	ps = escapees(t, cs)
	systemctl(t, "stop", unit)
	testutil.AssertDead(t, ps)
	if state, result := unitProperty(t, unit, "ActiveState"), unitProperty(t, unit, "Result"); state != "inactive" || result != "success" {
		t.Errorf("after systemctl stop the unit is %s (result %s), want inactive (success)", state, result)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", cgroupDir)); !os.IsNotExist(err) {
		t.Errorf("the unit's cgroup %s is left after systemctl stop: %v", cgroupDir, err)
	}
	// reaper ended the session itself (systemd's SIGKILL of what is left would come only after).
	log := journal(t, unit)
	var reasons []string
	for line := range strings.Lines(log) {
		if end, ok := testutil.LogLine(line, "session ended"); ok {
			reasons = append(reasons, end["reason"]+" remaining="+end["remaining"])
		}
	}
	if !slices.Equal(reasons, []string{"delete remaining=0", "shutdown remaining=0"}) {
		t.Errorf("the sessions ended %q, want by the DELETE and by reaper's shutdown, nothing remaining:\n%s", reasons, log)
	}
	if !strings.Contains(log, "reaper stopped") {
		t.Errorf("reaper did not log its own orderly stop:\n%s", log)
	}
	t.Logf("the unit's log:\n%s", log)
}
