package reaper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestInputBounds(t *testing.T) {
	r := newTestReaper(t, ContainProcess, Options{})
	s := newTestSession(t, r, SessionOptions{})
	long := strings.Repeat("d", MaxDescriptionBytes+1)
	if _, err := s.Start("true", long); !errors.Is(err, ErrBadInput) {
		t.Errorf("Start with a %d-byte description: %v, want ErrBadInput", len(long), err)
	}
	if _, err := s.Run(context.Background(), "true", RunOptions{Description: long}); !errors.Is(err, ErrBadInput) {
		t.Errorf("Run with a %d-byte description: %v, want ErrBadInput", len(long), err)
	}
	if _, err := s.Start("true", long[:MaxDescriptionBytes]); err != nil {
		t.Errorf("a description at the limit: %v", err)
	}
	id := "t-" + strings.Repeat("0", 1<<20)
	_, _, err := s.Output(context.Background(), id, OutputOptions{})
	if !errors.Is(err, ErrUnknownTask) || len(err.Error()) > 300 {
		t.Errorf("a 1 MiB task id: the error is %d bytes, want ErrUnknownTask and a short message: %.200v", len(err.Error()), err)
	}
}

// TestFinishedTasksAreBounded: however many background tasks finish unread, a session keeps at most
// MaxTasks of them, the newest.
func TestFinishedTasksAreBounded(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{MaxTasks: 3})
	s := newTestSession(t, r, SessionOptions{})
	var ids []string
	for i := range 8 {
		ti, err := s.Start("echo "+itoa(i), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Wait(context.Background(), ti.ID, time.Minute); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ti.ID)
	}
	l := s.List()
	if len(l.Tasks) != 3 {
		t.Fatalf("%d finished tasks kept, want 3: %+v", len(l.Tasks), l.Tasks)
	}
	for i, ti := range l.Tasks {
		if ti.ID != ids[5+i] {
			t.Errorf("kept %s, want the newest: %v", ti.ID, ids[5:])
		}
	}
	if _, err := s.lookup(ids[0]); !errors.Is(err, ErrUnknownTask) {
		t.Errorf("the oldest finished task is still there: %v", err)
	}
	if _, c, err := s.Output(context.Background(), ids[7], OutputOptions{}); err != nil || c.Text != "7\n" {
		t.Errorf("the newest: %q, %v", c.Text, err)
	}
}

// TestForegroundCommandKeptShort: a finished foreground command that left processes keeps its
// command only to name them, cut to a bound.
func TestForegroundCommandKeptShort(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{})
			s := newTestSession(t, r, SessionOptions{})
			cmd := "sleep 1000 & : " + strings.Repeat("x", 50<<10)
			run(t, s, cmd)
			l := s.List()
			if len(l.Leftovers) != 1 || len(l.Leftovers[0].Command) > maxListedCommand || !strings.HasPrefix(l.Leftovers[0].Command, "sleep 1000 & : xxx") {
				t.Fatalf("leftovers %+v", l.Leftovers)
			}
		})
	}
}
