package smallinit

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLoad: the program's file is sealed against every change, open read-only and close-on-exec at
// a descriptor above a child's first ones, and runs: outside a namespace, as anything but pid 1, it
// refuses, says why, and exits 2.
func TestLoad(t *testing.T) {
	p, err := Load()
	if runtime.GOARCH != "amd64" {
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("Load on %s: %v, want ErrUnsupported", runtime.GOARCH, err)
		}
		t.Skipf("skipped: no small init for %s", runtime.GOARCH)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fd := int(p.f.Fd())
	if fd < minFD {
		t.Errorf("the program's descriptor is %d, want %d or above", fd, minFD)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if seals&want != want {
		t.Errorf("seals %#x, want %#x", seals, want)
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fl&unix.FD_CLOEXEC == 0 {
		t.Error("the program's descriptor is inherited across exec")
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_ACCMODE != unix.O_RDONLY {
		t.Errorf("the program's descriptor is open %#x, want read-only", fl&unix.O_ACCMODE)
	}
	// Through another descriptor of the same file: writable, but the file is sealed.
	rw, err := os.OpenFile(p.Path(), os.O_RDWR, 0)
	if err == nil {
		_, err = rw.Write([]byte{0})
		rw.Close()
	}
	if err == nil {
		t.Error("the program's file could be written")
	}
	out, err := exec.Command(p.Path(), "reaper-init").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "the init of a session's PID namespace") {
		t.Errorf("the program run by hand: %v, %q; want exit status 2 and why", err, out)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// TestFail: Err is nil until Fail, then the first failure.
func TestFail(t *testing.T) {
	p, err := LoadImage([]byte("not a program"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Err() != nil {
		t.Fatalf("Err before Fail: %v", p.Err())
	}
	first := errors.New("first")
	p.Fail(first)
	p.Fail(errors.New("second"))
	if p.Err() != first {
		t.Errorf("Err is %v, want the first failure", p.Err())
	}
}
