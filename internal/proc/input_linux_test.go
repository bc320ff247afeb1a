package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FuzzParseSyscall formats /proc/<pid>/syscall lines from their fields and checks that parseSyscall
// gives them back; any bytes at all (the other forms: "running", "-1 sp pc") must not make it panic,
// and only a line of a call number and six hexadecimal arguments parses.
func FuzzParseSyscall(f *testing.F) {
	f.Add([]byte("running"), int64(0), uint64(0), uint64(0x7ffc1788b080), uint64(4096))
	f.Add([]byte("-1 0x7ffd 0x7f62"), int64(270), uint64(1), uint64(0), uint64(0))
	f.Add([]byte("0 0x0 0x55f79c95af40 0x1000 0x1000 0x7f754dc80c68 0x0 0x7fffc0011ca8 0x7f754dba52ad"), int64(7), uint64(1<<63), uint64(1), uint64(2))
	if b, err := os.ReadFile("/proc/self/syscall"); err == nil {
		f.Add(b, int64(0), uint64(0), uint64(0), uint64(0))
	}
	f.Fuzz(func(t *testing.T, raw []byte, nr int64, a0, a1, a2 uint64) {
		if sc, ok := parseSyscall(raw); ok && sc.nr < 0 {
			t.Errorf("parseSyscall(%q) = %+v: a negative call number", raw, sc)
		}
		if nr < 0 {
			nr = -nr - 1
		}
		line := fmt.Sprintf("%d 0x%x 0x%x 0x%x 0x0 0x0 0x7 0x7ffe 0x7f00\n", nr, a0, a1, a2)
		sc, ok := parseSyscall([]byte(line))
		if want := (syscallInfo{nr: nr, args: [6]uint64{a0, a1, a2, 0, 0, 7}}); !ok || sc != want {
			t.Errorf("parseSyscall(%q) = %+v, %v; want %+v", line, sc, ok, want)
		}
		if _, ok := parseSyscall([]byte(fmt.Sprintf("%d 0x%x", nr, a0))); ok {
			t.Errorf("a line of two fields parsed")
		}
	})
}

// TestWaitsFor: a process blocked reading a pipe waits for that pipe, and not for another; once it
// runs, it does not wait; its context switches count its sleeps.
func TestWaitsFor(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	rd, wr := os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	defer wr.Close()
	var st unix.Stat_t
	if err := unix.Fstat(p[0], &st); err != nil {
		t.Fatal(err)
	}
	in := Input{Target: "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"}
	cmd := exec.Command("head", "-c", "1")
	cmd.Stdin = rd
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	w := NewWalker()
	deadline := time.Now().Add(30 * time.Second)
	for !w.WaitsFor(cmd.Process.Pid, in) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/syscall")
			t.Fatalf("head never seen waiting for its pipe: syscall %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if w.WaitsFor(cmd.Process.Pid, Input{Target: "pipe:[1]"}) {
		t.Error("head waits for another pipe")
	}
	if n, ok := w.Switches(cmd.Process.Pid); !ok || n == 0 {
		t.Errorf("switches %d, %v", n, ok)
	}
	wr.Write([]byte("x"))
	cmd.Wait()
	if w.WaitsFor(cmd.Process.Pid, in) {
		t.Error("a process that is gone waits")
	}
}
