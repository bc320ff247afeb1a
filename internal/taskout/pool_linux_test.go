package taskout

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/safefs"
)

// TestPool: stores that share a pool hold at most its budget together, each still within its own;
// a store that meets a spent pool makes room from its own finished files first, then cuts, saying
// which budget did; closing a store gives back all it held.
func TestPool(t *testing.T) {
	pool := NewPool(100 << 10)
	store := func() *Store {
		dir, err := safefs.OpenRoot(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dir.Close() })
		return NewStore(Options{Dir: dir, Budget: 80 << 10, Pool: pool})
	}
	a, b := store(), store()
	old := a.New("old.out")
	old.Write(bytes.Repeat([]byte("o"), 30<<10))
	old.End()
	running := a.New("run.out")
	running.Write(bytes.Repeat([]byte("r"), 30<<10))
	if got := pool.Used(); got != 60<<10 {
		t.Fatalf("pool: %d bytes used, want 60 KiB", got)
	}
	// b fills what is left of the pool and is cut there, within its own budget of 80 KiB.
	big := b.New("big.out")
	big.Write(bytes.Repeat([]byte("b"), 70<<10))
	if fi := big.File(); !strings.Contains(fi.Cut, "all sessions together reached their budget of 100 KiB (--output-budget-total)") {
		t.Errorf("b's output, cut by the pool: %+v", fi)
	}
	if got := pool.Used(); got != 100<<10 {
		t.Errorf("pool: %d bytes used, want all 100 KiB", got)
	}
	// a needs room: the pool is spent, so its own finished file goes.
	running.Write(bytes.Repeat([]byte("r"), 20<<10))
	if fi := old.File(); !fi.Removed {
		t.Errorf("a's finished file was not removed for room: %+v", fi)
	}
	if fi := running.File(); fi.Cut != "" {
		t.Errorf("a's running output was cut though its own file made room: %+v", fi)
	}
	if got := pool.Used(); got > pool.Budget() {
		t.Errorf("pool: %d bytes used, over its %d", got, pool.Budget())
	}
	b.Close()
	a.Close()
	if got := pool.Used(); got != 0 {
		t.Errorf("pool after both stores closed: %d bytes used", got)
	}
	// A write after the close takes nothing from the pool.
	running.Write(bytes.Repeat([]byte("r"), 1<<10))
	if got := pool.Used(); got != 0 {
		t.Errorf("pool after a write to a closed store: %d bytes used", got)
	}
}
