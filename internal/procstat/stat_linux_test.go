package procstat

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
	byPath, ok := Read(-1, "/proc/"+strconv.Itoa(pid)+"/stat", pid)
	if !ok || byPath.Pid != pid || byPath.PPid != os.Getppid() || byPath.Start == 0 || byPath.Threads < 1 || byPath.Dead() {
		t.Fatalf("Read by path: %+v, %v", byPath, ok)
	}
	dir, err := syscall.Open("/proc", syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dir)
	below, ok := Read(dir, strconv.Itoa(pid)+"/stat", pid)
	if !ok || below.Start != byPath.Start || below.Pid != pid {
		t.Errorf("Read below /proc: %+v, %v; by path %+v", below, ok, byPath)
	}
	if st, ok := Read(dir, "0/stat", 0); ok {
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
