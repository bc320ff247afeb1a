package reaper

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestRegistry(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	g := NewRegistry()
	var sessions []*Session
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Concurrent registration, use and removal, for the race detector.
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := r.NewSession(fmt.Sprintf("reg-%d", i), SessionOptions{WorkDir: t.TempDir()})
			if err != nil {
				t.Error(err)
				return
			}
			if err := g.Register(s); err != nil {
				t.Error(err)
			}
			if _, err := s.Start("exec sleep 1000", ""); err != nil {
				t.Error(err)
			}
			if got, ok := g.Get(s.ID()); !ok || got != s {
				t.Errorf("Get(%s) = %v, %v", s.ID(), got, ok)
			}
			mu.Lock()
			sessions = append(sessions, s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := g.Register(sessions[0]); err == nil {
		t.Error("registering an id twice succeeded")
	}
	if rep, err := g.CloseAndRemove(context.Background(), "no-such-session"); err != nil || rep.Total() != 0 {
		t.Errorf("CloseAndRemove of an unknown id = %v, %v; want a no-op", rep, err)
	}
	rep, err := g.CloseAndRemove(context.Background(), sessions[0].ID())
	if err != nil || rep.Total() != 1 {
		t.Errorf("CloseAndRemove = %v, %v", rep, err)
	}
	if _, ok := g.Get(sessions[0].ID()); ok || g.Len() != 7 {
		t.Errorf("after CloseAndRemove: Len %d", g.Len())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.CloseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if g.Len() != 0 {
		t.Errorf("Len after CloseAll = %d", g.Len())
	}
	if d := descendants(t); len(d) != 0 {
		t.Errorf("processes left after CloseAll: %v", d)
	}
}

func TestOneReaperPerProcess(t *testing.T) {
	newTestReaper(t, ContainProcess, Options{})
	if _, err := New(Options{Containment: ContainProcess}); err == nil {
		t.Fatal("a second Reaper was created while the first is active")
	}
}

func TestReaperCloseKillsEverything(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{})
			var all []proc
			for i := range 3 {
				s, err := r.NewSession(fmt.Sprintf("s%d", i), SessionOptions{WorkDir: "/"})
				if err != nil {
					t.Fatal(err)
				}
				// In process containment an escapee that clears its environment and double-forks
				// cannot be attributed to a session; Reaper.Close still kills it.
				all = append(all, pidsIn(t, run(t, s, "env -i /bin/sh -c '/bin/sh -c \"echo \\$\\$; exec sleep 1000\" &'; sleep 0.1").Output)...)
			}
			if err := r.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			assertDead(t, all)
			if d := descendants(t); len(d) != 0 {
				t.Errorf("left after Reaper.Close: %v", d)
			}
			if err := r.Close(context.Background()); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := r.NewSession("late", SessionOptions{}); err == nil {
				t.Error("NewSession after Close succeeded")
			}
		})
	}
}
