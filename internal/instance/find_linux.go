package instance

import (
	"cmp"
	"errors"
	"path/filepath"
	"strings"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/safefs"
)

// Found is an instance whose slice or state directory Look found.
type Found struct {
	Name string
	// Slice is its slice directly below the root, checked (cgroup.Root.Open); nil when there is none.
	Slice    *cgroup.Slice
	StateDir string // the path of its state directory; empty when there is none
	// Record is what its state directory records of it, when HasRecord: a record that holds (see
	// ReadRecord). What it names is data: Slice and StateDir are what was found, not what it says.
	Record    Record
	HasRecord bool
}

// Where says where a process that only looks (reaper ps, a sweep) finds instances. The zero value
// looks where a Reaper with zero Options keeps them.
type Where struct {
	// Cgroup names the slice root to look under (see reaper's Options.Cgroup). Where it does not exist
	// or cannot be used, only state directories (and /proc) are looked at.
	Cgroup cgroup.Options
	// StateDir is where instances keep their state directories; empty means DefaultStateDir().
	StateDir string
	// NoCgroup looks at state directories (and /proc) only.
	NoCgroup bool
}

// Looked is what Where.Look opened and found.
type Looked struct {
	Root    *cgroup.Root // the root looked under; nil when none was
	State   *safefs.Dir  // the state directory, open (LookStateDir); nil when there is none
	Found   map[string]*Found
	Ignored []Ignored
}

// Ignored is something Look found and left alone, and why.
type Ignored struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Look opens the root and the state directory that w names, and finds there the instances for which
// want reports true (nil: all; asked once per name). The caller closes Looked.State. A slice is
// taken only if it sits directly below the root under an instance's name and passes
// cgroup.Root.Open; a state directory only if it is named after an instance and passes safefs; a
// record only if it holds, and a slice it names elsewhere than below the root is reported, not used.
// What is not taken is listed as Ignored. The error says what could not be listed.
func (w Where) Look(want func(name string) bool) (Looked, error) {
	var root *cgroup.Root
	if !w.NoCgroup {
		root, _ = cgroup.LookupRoot(w.Cgroup)
	}
	state, err := LookStateDir(w.StateDir)
	errs := []error{err}
	found := make(map[string]*Found)
	asked := make(map[string]bool)
	get := func(name string) *Found {
		if !asked[name] {
			asked[name] = true
			if want == nil || want(name) {
				found[name] = &Found{Name: name}
			}
		}
		return found[name]
	}
	var ignored []Ignored
	if root != nil {
		names, err := root.Slices()
		errs = append(errs, err)
		for _, name := range names {
			path := filepath.Join(root.Path(), name)
			if _, _, ok := ParseName(name); !ok {
				ignored = append(ignored, Ignored{path, "not an instance's slice (r<pid>-<start time>)"})
				continue
			}
			s, err := root.Open(name)
			if err != nil {
				ignored = append(ignored, Ignored{path, err.Error()})
				continue
			}
			if f := get(name); f != nil {
				f.Slice = s
			}
		}
	}
	if state != nil {
		entries, err := state.Entries(0)
		errs = append(errs, err)
		for _, e := range entries {
			path := state.Join(e.Name)
			if e.Name == TokenFile || strings.HasPrefix(e.Name, "."+TokenFile+".") {
				continue // the state directory's own (see StateToken)
			}
			name, ok := FromDirName(e.Name)
			if !ok {
				ignored = append(ignored, Ignored{path, "not an instance's state directory (reaper-r<pid>-<start time>)"})
				continue
			}
			dir, err := state.OpenDir(e.Name)
			if err != nil {
				ignored = append(ignored, Ignored{path, err.Error()})
				continue
			}
			f := get(name)
			if f == nil {
				dir.Close()
				continue
			}
			f.StateDir = path
			rec, err := ReadRecord(dir, name)
			dir.Close()
			own := "" // where the instance's slice would be, below root
			if root != nil {
				own = filepath.Join(root.Path(), name)
			}
			switch {
			case err != nil:
				ignored = append(ignored, Ignored{filepath.Join(path, RecordFile), err.Error()})
				continue
			case rec.Slice != "" && rec.Slice != own:
				ignored = append(ignored, Ignored{rec.Slice, "named by the record of instance " + name +
					", but it is not that instance's slice below the root looked under (" + cmp.Or(own, "none") + "): left alone"})
			}
			f.Record, f.HasRecord = rec, true
		}
	}
	return Looked{Root: root, State: state, Found: found, Ignored: ignored}, errors.Join(errs...)
}
