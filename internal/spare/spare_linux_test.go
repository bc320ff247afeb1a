package spare

import (
	"testing"

	"golang.org/x/sys/unix"
)

// withLimit lowers this process's descriptor limit to what it has open plus room, and fills the room
// with descriptors of its own, so that the next open is refused; the cleanup undoes both.
func withLimit(t *testing.T, r *Reserve) {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// The highest descriptor open now, and some room above it for the reserve and the test.
	top := 0
	for fd := 0; fd < 4096; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			top = fd
		}
	}
	lim := unix.Rlimit{Cur: uint64(top + 16), Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var filler []int
	t.Cleanup(func() {
		for _, fd := range filler {
			unix.Close(fd)
		}
		unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	})
	r.Refill()
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			if !Limited(err) {
				t.Fatal(err)
			}
			return
		}
		filler = append(filler, fd)
	}
}

func TestReserveLendsUnderTheLimit(t *testing.T) {
	r := New(4)
	defer r.Release()
	withLimit(t, r)
	open := func() (int, error) { return unix.Open("/proc/self/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0) }
	if fd, err := open(); err == nil {
		unix.Close(fd)
		t.Fatal("an open succeeded with the descriptor table full: the test holds too little")
	}
	if r.Spares() != 4 {
		t.Fatalf("the reserve holds %d spares, want 4", r.Spares())
	}
	// Two at once, as a teardown's read of a process while it holds a pidfd.
	a, err := r.Open(open)
	if err != nil {
		t.Fatalf("open through the reserve: %v", err)
	}
	b, err := r.Open(open)
	if err != nil {
		t.Fatalf("a second open through the reserve: %v", err)
	}
	if r.Spares() != 2 {
		t.Errorf("the reserve holds %d spares with two lent, want 2", r.Spares())
	}
	r.Close(a)
	r.Close(b)
	if r.Spares() != 4 {
		t.Errorf("the reserve holds %d spares once both were closed, want 4", r.Spares())
	}
	// Empty, it gives up what the limit refuses.
	var lent []int
	for range 4 {
		fd, err := r.Open(open)
		if err != nil {
			t.Fatal(err)
		}
		lent = append(lent, fd)
	}
	if _, err := r.Open(open); !Limited(err) {
		t.Errorf("an open past the reserve: %v, want EMFILE", err)
	}
	for _, fd := range lent {
		r.Close(fd)
	}
	if r.Spares() != 4 {
		t.Errorf("the reserve holds %d spares at the end, want 4", r.Spares())
	}
}

func TestNilReserve(t *testing.T) {
	var r *Reserve
	fd, err := r.Open(func() (int, error) { return unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		t.Fatal(err)
	}
	r.Close(fd)
	r.Refill()
	if r.Spares() != 0 {
		t.Error("a nil reserve holds spares")
	}
}
