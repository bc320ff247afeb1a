package reaper

import (
	"errors"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/taskout"
)

// TestSettingsMeanOneThing: a zero setting is its default, zero grace is none, and a negative setting
// is refused before anything is made.
func TestSettingsMeanOneThing(t *testing.T) {
	def := Options{}.limits()
	if def != (Limits{Grace: DefaultGrace, CloseTimeout: DefaultCloseTimeout, MaxTasks: DefaultMaxTasks, OutputBudget: DefaultOutputBudget, OutputTail: taskout.MaxTail, Retention: DefaultRetention}) {
		t.Errorf("the zero Options resolve to %+v", def)
	}
	if l := (Options{Grace: new(time.Duration(0))}).limits(); l.Grace != 0 {
		t.Errorf("a zero grace resolves to %v, want none", l.Grace)
	}
	if l := (Options{Grace: new(2 * time.Second), AutoBackground: time.Second}).limits(); l.Grace != 2*time.Second || l.AutoBackground != time.Second {
		t.Errorf("set values resolve to %+v", l)
	}
	for _, opts := range []Options{
		{Grace: new(-time.Second)}, {CloseTimeout: -1}, {MaxTasks: -1}, {OutputBudget: -1}, {Retention: -1},
		{BackgroundTimeout: -1}, {AutoBackground: -1},
	} {
		if r, err := New(opts); !errors.Is(err, ErrBadInput) {
			if err == nil {
				r.Close(t.Context())
			}
			t.Errorf("New(%+v) = %v, want ErrBadInput", opts, err)
		}
	}
}
