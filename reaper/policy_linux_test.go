package reaper

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
)

// TestKillReportCarriesEveryField: killReport and KillReport.String copy kill.Report's fields by
// hand (Remaining's type differs), so a field added to one and not the other, or not copied, would
// never reach the library's users or the log line. Both types must name the same fields, and a
// report with every field set must come through killReport with every field set, and back through
// String unchanged.
func TestKillReportCarriesEveryField(t *testing.T) {
	names := func(v any) []string {
		var out []string
		for f := range reflect.TypeOf(v).Fields() {
			out = append(out, f.Name)
		}
		slices.Sort(out)
		return out
	}
	if in, out := names(kill.Report{}), names(KillReport{}); !slices.Equal(in, out) {
		t.Fatalf("kill.Report has fields %v, KillReport %v: killReport and KillReport.String must copy each", in, out)
	}
	k := kill.Report{Terminated: 1, Killed: 2, Walked: 3, Found: 4, Remaining: []proc.Proc{{Pid: 5, Comm: "x", State: "S"}},
		Unaccounted: true, Duration: time.Second, Usage: &cgroup.Stats{}}
	for f, v := range reflect.ValueOf(k).Fields() {
		if v.IsZero() {
			t.Fatalf("the test's kill.Report leaves %s unset: set it", f.Name)
		}
	}
	r := killReport(k)
	for f, v := range reflect.ValueOf(r).Fields() {
		if v.IsZero() {
			t.Errorf("killReport does not copy %s", f.Name)
		}
	}
	if got, want := r.String(), k.String(); got != want || !strings.Contains(got, "x") {
		t.Errorf("KillReport.String() = %q, kill.Report's %q", got, want)
	}
}
