package pidns

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
)

// The test process's one child reaper and the thread inits are forked from, for every test.
var (
	kids   *reap.Children
	forker *reap.Forker
)

func TestMain(m *testing.M) {
	if IsInit(os.Args) {
		os.Exit(RunInit()) // this test binary, run as an init by a test
	}
	kids = reap.NewChildren()
	var err error
	if forker, err = reap.StartForker(nil); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// testOptions are Options that run this test binary as the init.
func testOptions(t testing.TB) Options {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{Path: exe, Forker: forker, Children: kids, Stderr: os.Stderr, Timeout: 30 * time.Second}
}

// startInit starts an init the way this host allows (skipping the test where none does); cleanup
// kills it and waits for its namespace to be gone.
func startInit(t testing.TB) *Init {
	t.Helper()
	return startInitWith(t, nil)
}

// startInitWith is startInit with the options set by set, if it is not nil.
func startInitWith(t testing.TB, set func(*Options)) *Init {
	t.Helper()
	opts := testOptions(t)
	m, err := Probe(opts)
	if err != nil {
		t.Skipf("skipped: this host gives no PID namespaces: %v", err)
	}
	opts.UserNS = m.UserNS
	if set != nil {
		set(&opts)
	}
	in, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-in.stop:
			return // the test closed it
		default:
		}
		in.Kill()
		if !in.Wait(context.Background(), time.Now().Add(30*time.Second)) {
			t.Errorf("cleanup: the init %d did not end within 30 s", in.Pid())
		}
		in.Close()
	})
	return in
}

// The test helpers of internal/testutil, which cannot be used here: it imports this package.

// eventually polls cond until it holds, failing the test after 30 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alive returns the processes of ps that still run (same pid and start time, not dead).
func alive(ps []proc.Stat) []proc.Stat {
	var out []proc.Stat
	w := proc.NewWalker()
	for _, p := range ps {
		if st, ok := w.Stat(p.Pid); ok && st.Start == p.Start && !st.Dead() {
			out = append(out, p)
		}
	}
	return out
}

func assertDead(t testing.TB, ps []proc.Stat) {
	t.Helper()
	for _, p := range alive(ps) {
		t.Errorf("pid %d survived: %s", p.Pid, proc.Describe(p.Pid))
	}
}

// fdsOf returns the descriptors of files, for Request.FDs.
func fdsOf(files ...*os.File) []int {
	out := make([]int, len(files))
	for i, f := range files {
		out[i] = int(f.Fd())
	}
	return out
}
