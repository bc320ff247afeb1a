package tty

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTerminal: the task's side is a terminal of the size asked for, given to the uid asked for;
// input written to the master reaches it through the line discipline; a resize reaches it too; and
// closing the input leaves the master, which the output is read from, open.
func TestTerminal(t *testing.T) {
	master, slave, id, err := Open(Size{Rows: 30, Cols: 100}, os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close(); slave.Close() })
	if !strings.HasPrefix(id.Target, "/dev/pts/") || id.TTY == 0 {
		t.Errorf("terminal named %+v", id)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(slave.Fd()), &st); err != nil || int(st.Uid) != os.Getuid() {
		t.Errorf("terminal owned by %d (%v), want %d", st.Uid, err, os.Getuid())
	}
	ws, err := unix.IoctlGetWinsize(int(slave.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Row != 30 || ws.Col != 100 {
		t.Errorf("size %+v (%v), want 30x100", ws, err)
	}
	in := NewTerminal(master, id)
	if !in.TTY() || in.ID() != id {
		t.Errorf("input: tty %v, id %+v", in.TTY(), in.ID())
	}
	if n, err := in.Write([]byte("hello\n"), 5*time.Second); n != 6 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	buf := make([]byte, 64)
	n, err := slave.Read(buf) // canonical mode: one line
	if err != nil || string(buf[:n]) != "hello\n" {
		t.Errorf("the task read %q, %v", buf[:n], err)
	}
	if err := in.Resize(Size{Rows: 50, Cols: 132}); err != nil {
		t.Fatal(err)
	}
	if ws, err := unix.IoctlGetWinsize(int(slave.Fd()), unix.TIOCGWINSZ); err != nil || ws.Row != 50 || ws.Col != 132 {
		t.Errorf("size after resize %+v (%v), want 50x132", ws, err)
	}
	if g := in.ForegroundGroup(); g != 0 {
		t.Errorf("foreground group %d of a terminal nobody controls, want 0", g)
	}
	in.Close()
	if _, err := in.Write([]byte("x"), time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("write after close: %v, want ErrClosed", err)
	}
	if _, err := master.Write([]byte("x")); err != nil {
		t.Errorf("the master was closed with the input: %v", err)
	}
}

// TestPipe: a pipe's write stops at its deadline when nothing reads, saying how much was taken;
// closing the input gives the reader the end of input; a pipe has no size.
func TestPipe(t *testing.T) {
	rd, wr, id, err := Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close(); wr.Close() })
	if !strings.HasPrefix(id.Target, "pipe:[") || id.TTY != 0 {
		t.Errorf("pipe named %+v", id)
	}
	in := NewPipe(wr, id)
	if in.TTY() || in.ForegroundGroup() != 0 || in.Resize(Size{Rows: 1, Cols: 1}) == nil {
		t.Error("a pipe passes for a terminal")
	}
	big := make([]byte, 1<<20) // more than a pipe holds
	start := time.Now()
	n, err := in.Write(big, 200*time.Millisecond)
	if !errors.Is(err, ErrStalled) || n == 0 || n >= len(big) {
		t.Errorf("write to a full pipe: %d bytes, %v; want some taken and ErrStalled", n, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the write took %v past its deadline", d)
	}
	in.Close()
	in.Close() // idempotent
	got := 0
	for {
		k, err := rd.Read(big)
		got += k
		if err != nil {
			break
		}
	}
	if got != n {
		t.Errorf("the reader got %d bytes, the write said %d", got, n)
	}
	if _, err := in.Write([]byte("x"), time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("write after close: %v, want ErrClosed", err)
	}
}

// TestOpenIn: a terminal opened in a devpts instance of its own (as a session's init mounts one) is
// made there, not in the host's instance; a directory whose ptmx is not that instance's ptmx device
// (a regular file, a link to the host's /dev/ptmx) is refused.
func TestOpenIn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting a devpts instance needs root")
	}
	devpts := privateDevpts(t)
	master, slave, id, err := OpenIn(devpts, Size{Rows: 24, Cols: 80}, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	var peer, inst, host unix.Stat_t
	if err := unix.Fstat(int(slave.Fd()), &peer); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(int(devpts.Fd()), &inst); err != nil {
		t.Fatal(err)
	}
	if peer.Dev != inst.Dev {
		t.Errorf("the terminal %s is on device %d, the instance is %d", id.Target, peer.Dev, inst.Dev)
	}
	if err := unix.Stat("/dev/pts", &host); err == nil && peer.Dev == host.Dev {
		t.Errorf("the terminal %s was made in the host's devpts", id.Target)
	}
	for name, plant := range map[string]func(dir string) error{
		"a regular file": func(dir string) error { return os.WriteFile(dir+"/ptmx", nil, 0o666) },
		"a link":         func(dir string) error { return os.Symlink("/dev/ptmx", dir+"/ptmx") },
	} {
		dir := t.TempDir()
		if err := plant(dir); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if m, s, _, err := OpenIn(f, Size{Rows: 24, Cols: 80}, -1); err == nil {
			m.Close()
			s.Close()
			t.Errorf("%s as ptmx: a terminal was opened", name)
		}
		f.Close()
	}
}

// privateDevpts mounts a devpts instance on a directory in a mount namespace of a thread of its own
// (which exits with it) and returns an O_PATH descriptor of its root, which keeps it.
func privateDevpts(t *testing.T) *os.File {
	t.Helper()
	dir := t.TempDir()
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, its namespace with it
		var res result
		defer func() { done <- res }()
		if res.err = unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); res.err != nil {
			return
		}
		if res.err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); res.err != nil {
			return
		}
		if res.err = unix.Mount("devpts", dir, "devpts", 0, "newinstance,ptmxmode=0666"); res.err != nil {
			return
		}
		res.f, res.err = os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	}()
	res := <-done
	if res.err != nil {
		t.Skipf("skipped: no devpts instance of its own here: %v", res.err)
	}
	t.Cleanup(func() { res.f.Close() })
	return res.f
}
