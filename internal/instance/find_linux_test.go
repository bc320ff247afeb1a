package instance

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/safefs"
)

// TestFind: in a state directory, Look takes an instance's directory with its record, takes one
// whose record does not hold without the record, reports what is not an instance's and a slice a
// record names elsewhere, and asks want once per name.
func TestFind(t *testing.T) {
	state, err := safefs.CreateRoot(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	write := func(name string, rec any) {
		t.Helper()
		if err := state.Mkdir(DirName(name)); err != nil {
			t.Fatal(err)
		}
		d, err := state.OpenDir(DirName(name))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		b, _ := json.Marshal(rec)
		if err := d.WriteFile(RecordFile, b); err != nil {
			t.Fatal(err)
		}
	}
	rec := func(name string, pid int, start uint64, slice string) Record {
		return Record{Name: name, Pid: pid, Start: start, Slice: slice, Containment: ContainProcess, Started: time.Unix(1, 0).UTC()}
	}
	write("r11-1", rec("r11-1", 11, 1, ""))
	write("r12-1", rec("r12-1", 12, 1, "/sys/fs/cgroup/elsewhere"))
	write("r13-1", rec("r14-1", 14, 1, "")) // names another instance
	write("r15-1", rec("r15-1", 15, 1, ""))
	if err := state.Mkdir("not-an-instance"); err != nil {
		t.Fatal(err)
	}
	var asked []string
	l, err := Where{StateDir: state.Path(), NoCgroup: true}.Look(func(name string) bool {
		asked = append(asked, name)
		return name != "r15-1"
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.State.Close()
	found, ignored := l.Found, l.Ignored
	slices.Sort(asked)
	if want := []string{"r11-1", "r12-1", "r13-1", "r15-1"}; !slices.Equal(asked, want) {
		t.Errorf("want was asked for %v; want each name once: %v", asked, want)
	}
	for name, wantRecord := range map[string]bool{"r11-1": true, "r12-1": true, "r13-1": false} {
		f := found[name]
		if f == nil || f.StateDir != state.Join(DirName(name)) || f.HasRecord != wantRecord || f.Slice != nil {
			t.Errorf("%s: found %+v; want its state directory, a record %v, no slice", name, f, wantRecord)
		}
	}
	if found["r15-1"] != nil || len(found) != 3 {
		t.Errorf("found %v: want r15-1, which want refused, left out", found)
	}
	reasons := map[string]string{}
	for _, ig := range ignored {
		reasons[ig.Path] = ig.Reason
	}
	for path, reason := range map[string]string{
		state.Join("not-an-instance"):                           "not an instance's state directory",
		filepath.Join(state.Join(DirName("r13-1")), RecordFile): "names instance",
		"/sys/fs/cgroup/elsewhere":                              "not that instance's slice",
	} {
		if !strings.Contains(reasons[path], reason) {
			t.Errorf("ignored %v: want %s reported for %q", ignored, path, reason)
		}
	}
}
