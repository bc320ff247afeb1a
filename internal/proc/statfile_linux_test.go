package proc

import (
	"os"
	"strconv"
	"syscall"
	"testing"
)

// TestRead: this process's stat, by path and below a directory descriptor of /proc, says the same;
// a pid that names no process is not ok.
func TestRead(t *testing.T) {
	pid := os.Getpid()
	byPath, ok := ReadStat(-1, "/proc/"+strconv.Itoa(pid)+"/stat", pid)
	if !ok || byPath.Pid != pid || byPath.PPid != os.Getppid() || byPath.Start == 0 || byPath.Threads < 1 || byPath.Dead() {
		t.Fatalf("Read by path: %+v, %v", byPath, ok)
	}
	dir, err := syscall.Open("/proc", syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dir)
	below, ok := ReadStat(dir, strconv.Itoa(pid)+"/stat", pid)
	if !ok || below.Start != byPath.Start || below.Pid != pid {
		t.Errorf("Read below /proc: %+v, %v; by path %+v", below, ok, byPath)
	}
	if st, ok := ReadStat(dir, "0/stat", 0); ok {
		t.Errorf("Read of pid 0: %+v", st)
	}
}

// TestFdinfoPid: the Pid line of a pidfd's fdinfo, -1 for a reaped process, 0 without one.
func TestFdinfoPid(t *testing.T) {
	for in, want := range map[string]int{
		"pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nPid:\t4242\nNSpid:\t4242\t1\n": 4242,
		"Pid:\t-1\n": -1,
		"pos:\t0\n":  0,
		"Pid:\tx\n":  0,
	} {
		if got := FdinfoPid([]byte(in)); got != want {
			t.Errorf("FdinfoPid(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestReadAtRefuses: a link, a FIFO (which an open would wait on) and a directory are not read; a
// regular file is, up to the buffer's size.
func TestReadAtRefuses(t *testing.T) {
	dir := t.TempDir()
	file, fifo, link := dir+"/file", dir+"/fifo", dir+"/link"
	if err := os.WriteFile(file, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{fifo, link, dir} {
		if b, ok := ReadAt(-1, name, make([]byte, 16)); ok {
			t.Errorf("ReadAt(%s) read %q", name, b)
		}
	}
	if b, ok := ReadAt(-1, file, make([]byte, 4)); !ok || string(b) != "0123" {
		t.Errorf("ReadAt of a regular file: %q, %v", b, ok)
	}
}

// TestDead: a zombie or an exiting process is dead unless other threads than its main thread live
// on (a zombie counts itself among Threads).
func TestDead(t *testing.T) {
	for _, c := range []struct {
		st   Stat
		dead bool
	}{
		{Stat{State: 'S', Threads: 1}, false},
		{Stat{State: 'R', Threads: 4}, false},
		{Stat{State: 'Z', Threads: 1}, true},
		{Stat{State: 'R', Flags: pfExiting, Threads: 1}, true},
		{Stat{State: 'D', Flags: pfExiting}, true},
		{Stat{State: 'Z', Flags: pfExiting, Threads: 2}, false},
		{Stat{State: 'R', Flags: pfExiting, Threads: 3}, false},
	} {
		if got := c.st.Dead(); got != c.dead {
			t.Errorf("%+v: Dead() = %v, want %v", c.st, got, c.dead)
		}
	}
}
