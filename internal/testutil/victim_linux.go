package testutil

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Victim is what a test of hostile input checks nothing touched: a process (in a cgroup of its own
// when there is a cgroup2 mount), a file only root may read, and a directory with a file in it.
type Victim struct {
	Proc   Proc
	Cgroup string // the process's cgroup, outside anything the code under test owns; "" without one
	File   string // root's, mode 0600, holding Secret
	Dir    string // holding Dir/kept
	Secret string
}

// NewVictim makes a victim; with mount set (a cgroup2 mountpoint), its process lives in a new cgroup
// directly below it. Cleanup kills the process and removes the cgroup, even when the test fails.
func NewVictim(t testing.TB, mount string) *Victim {
	t.Helper()
	base := t.TempDir()
	v := &Victim{
		File:   filepath.Join(base, "victim-file"),
		Dir:    filepath.Join(base, "victim-dir"),
		Secret: "victim-secret-" + rand.Text()[:12],
	}
	if err := os.WriteFile(v.File, []byte(v.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(v.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.Dir, "kept"), []byte(v.Secret), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "100000")
	if mount != "" {
		v.Cgroup = filepath.Join(mount, UniqueName("victim-"))
		if err := os.Mkdir(v.Cgroup, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { RemoveCgroup(t, v.Cgroup) })
		f, err := os.Open(v.Cgroup)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p, ok := ProcOf(cmd.Process.Pid)
	if !ok {
		t.Fatal("the victim process died at once")
	}
	v.Proc = p
	return v
}

// Check fails the test if anything of the victim was touched: the process killed or moved, the cgroup
// removed, the file or the directory changed.
func (v *Victim) Check(t testing.TB) {
	t.Helper()
	if !Running(v.Proc) {
		t.Errorf("the victim process %d was killed", v.Proc.Pid)
	}
	if v.Cgroup != "" {
		b, err := os.ReadFile(filepath.Join(v.Cgroup, "cgroup.procs"))
		if err != nil || !strings.Contains(string(b), strconv.Itoa(v.Proc.Pid)+"\n") {
			t.Errorf("the victim cgroup %s lost its process or was removed: %q, %v", v.Cgroup, b, err)
		}
	}
	if b, err := os.ReadFile(v.File); err != nil || string(b) != v.Secret+"\n" {
		t.Errorf("the victim file %s changed: %q, %v", v.File, b, err)
	}
	if b, err := os.ReadFile(filepath.Join(v.Dir, "kept")); err != nil || string(b) != v.Secret {
		t.Errorf("the victim directory %s changed: %q, %v", v.Dir, b, err)
	}
}
