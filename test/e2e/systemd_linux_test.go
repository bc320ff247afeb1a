package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/testutil"
)

const unitPath = "../../deploy/systemd/reaper.service"

// installedUnit returns the unit with its ExecStart pointing at the binary under test instead of
// /usr/local/bin/reaper, which `systemd-analyze verify` would report missing; the copy is written to
// a temporary directory under the same name.
func installedUnit(t *testing.T) (path string, execStart []string) {
	t.Helper()
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(unit), "\n") {
		if rest, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = strings.Fields(rest)
		}
	}
	if len(execStart) == 0 || execStart[0] != "/usr/local/bin/reaper" {
		t.Fatalf("%s: ExecStart %q does not run /usr/local/bin/reaper", unitPath, execStart)
	}
	path = filepath.Join(t.TempDir(), "reaper.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/reaper", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, execStart
}

func needSystemdAnalyze(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("skipped: systemd-analyze is not installed (Debian's package: systemd)")
	}
}

// TestSystemdUnitVerifies runs `systemd-analyze verify` on the unit, which reports unknown or
// misspelt settings and bad values on stderr (exiting 0 for most of them): any output fails.
func TestSystemdUnitVerifies(t *testing.T) {
	needSystemdAnalyze(t)
	path, execStart := installedUnit(t)
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitPath, err, out)
	}
	unit, _ := os.ReadFile(path)
	for _, want := range []string{"Type=notify", "NotifyAccess=all", "Delegate=yes", "KillMode=mixed", "User=reaper"} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).Match(unit) {
			t.Errorf("%s lacks %s", unitPath, want)
		}
	}
	// The binary must accept ExecStart's flags: parsing stops at --help, after them.
	if out, err := exec.Command(bin, append(execStart[1:], "--help")...).CombinedOutput(); err != nil {
		t.Errorf("reaper %v --help: %v\n%s", execStart[1:], err, out)
	}
}

// TestSystemdUnitSecurity checks that `systemd-analyze security` rates the unit no worse than the
// score its comment states.
func TestSystemdUnitSecurity(t *testing.T) {
	needSystemdAnalyze(t)
	path, _ := installedUnit(t)
	unit, _ := os.ReadFile(path)
	m := regexp.MustCompile(`rates this\s+(?:#\s*)?unit (\d+\.\d)`).FindSubmatch(unit)
	if m == nil {
		t.Fatalf("%s does not state its systemd-analyze security score (\"rates this unit N.N\")", unitPath)
	}
	stated, _ := strconv.ParseFloat(string(m[1]), 64)
	out, err := exec.Command("systemd-analyze", "security", "--offline=true", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m = regexp.MustCompile(`Overall exposure level for reaper\.service: (\d+\.\d)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no overall exposure level in:\n%s", out)
	}
	measured, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: %.1f (the unit states %.1f)", measured, stated)
	if measured > stated {
		t.Errorf("exposure %.1f is worse than the %.1f the unit states:\n%s", measured, stated, out)
	}
}

// TestSystemdSysusers creates the unit's user from deploy/systemd/reaper-sysusers.conf in a
// scratch root, as systemd-sysusers does at installation.
func TestSystemdSysusers(t *testing.T) {
	if _, err := exec.LookPath("systemd-sysusers"); err != nil {
		t.Skip("skipped: systemd-sysusers is not installed (Debian's package: systemd)")
	}
	conf, err := filepath.Abs("../../deploy/systemd/reaper-sysusers.conf")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	if out, err := exec.Command("systemd-sysusers", "--root="+root, conf).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^reaper:x:\d+:\d+:[^:]*:/var/lib/reaper:/usr/sbin/nologin$`).Match(passwd) {
		t.Errorf("systemd-sysusers made no reaper user with home /var/lib/reaper:\n%s", passwd)
	}
}

// TestSystemdOperatorFindsSessions: an operator of the unit finds its sessions with the commands its
// comment gives, and the same command is in the first line it logs. reaper runs here with the
// unit's ExecStart in a cgroup named as the unit's is (system.slice/reaper.service, below a cgroup of
// the test's that stands for /sys/fs/cgroup), its state directory standing for /run/reaper; the
// comment's `reaper ps`, so mapped, lists the session with its slice and processes.
func TestSystemdOperatorFindsSessions(t *testing.T) {
	info := cgroup.Detect(cgroup.Options{})
	if os.Geteuid() != 0 || !info.Usable() {
		t.Skipf("skipped: needs root and a writable cgroup2 hierarchy: %s", info)
	}
	mount := filepath.Join(info.Mountpoint, testutil.UniqueName("reaper-e2e-unit-"))
	unitCgroup := filepath.Join(mount, "system.slice", "reaper.service")
	if err := os.MkdirAll(unitCgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(unitCgroup) // the test's own two, made empty by reaper's end; RemoveCgroup says what was not
		os.Remove(filepath.Dir(unitCgroup))
		testutil.RemoveCgroup(t, mount)
	})
	runDir := t.TempDir()
	unit, _ := os.ReadFile(unitPath)
	var psLine string
	for _, line := range strings.Split(string(unit), "\n") {
		if _, cmd, ok := strings.Cut(line, "sudo -u reaper reaper ps "); ok {
			psLine = "reaper ps " + strings.TrimSpace(strings.Split(cmd, "#")[0])
		}
	}
	if psLine == "" {
		t.Fatalf("%s does not tell the operator how to run reaper ps (sudo -u reaper reaper ps ...)", unitPath)
	}
	mapped := strings.NewReplacer("/run/reaper", runDir, "/sys/fs/cgroup", mount).Replace(psLine)

	_, execStart := installedUnit(t)
	args := strings.Fields(strings.NewReplacer("127.0.0.1:8765", "127.0.0.1:0", "%t/reaper", runDir).Replace(strings.Join(execStart[1:], " ")))
	dir, err := os.Open(unitCgroup)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cmd := reaperCmd(args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	p := startCmd(t, cmd, nil, nil)
	p.awaitServing(t)
	line, _ := testutil.LogLine(p.stderr.String(), testutil.ServingHTTP)
	if line["ps"] != mapped || line["state_dir"] != runDir {
		t.Errorf("the first line logs state_dir=%q ps=%q; the unit's comment says (mapped here) %q", line["state_dir"], line["ps"], mapped)
	}
	r := bash(t, p.connect(t), "sleep 300 & echo $!")
	words := strings.Fields(mapped)
	out, code := runOnce(t, nil, words[1:]...)
	if code != 0 || !strings.Contains(out, "slice "+unitCgroup+"/reaper/r") || !strings.Contains(out, "sleep 300") ||
		strings.Contains(out, "outside its slice") || strings.Contains(out, "ignored") {
		t.Errorf("%s (exit %d), after %q left a process:\n%s", mapped, code, r.Output, out)
	}
}
