package mcpserver

import (
	"testing"
	"time"

	"github.com/cgreaper/reaper/reaper"
)

// TestNegativeOptionsRefused: as in reaper.Options, a negative setting means nothing.
func TestNegativeOptionsRefused(t *testing.T) {
	r, err := reaper.New(reaper.Options{Containment: reaper.ContainProcess, WorkDir: t.TempDir(), StateDir: t.TempDir(), NoSweep: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(t.Context()) })
	for _, opts := range []Options{{IdleTimeout: -time.Second}, {KeepAlive: -time.Second}, {MaxWorkspaces: -1}} {
		opts.Reaper = r
		if srv, err := New(opts); err == nil {
			srv.Close(t.Context())
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}
