package mcpserver

import (
	"testing"

	"github.com/cgreaper/reaper/reaper"
)

// BenchmarkNew measures making a Server, which a stdio client waits for at every start of reaper
// serve (its tools' schemas are inferred and resolved here).
//
//	go test -run '^$' -bench BenchmarkNew ./mcpserver
func BenchmarkNew(b *testing.B) {
	r, err := reaper.New(reaper.Options{Containment: reaper.ContainProcess, WorkDir: b.TempDir(), StateDir: b.TempDir(), NoSweep: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close(b.Context()) })
	b.ReportAllocs()
	for b.Loop() {
		srv, err := New(Options{Reaper: r})
		if err != nil {
			b.Fatal(err)
		}
		srv.Close(b.Context())
	}
}
