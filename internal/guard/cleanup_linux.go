package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"github.com/cgreaper/reaper/internal/safefs"
	"golang.org/x/sys/unix"
)

// cleanUp is a guard's work once its server has ended without a clean end: it kills the processes
// in the announced slice and every descendant of this process, then removes the slice and the
// instance's state directory, adding to res what it killed and what failed. It runs this process's
// wait loop meanwhile (reap.Claim), which reaps what the kills end among its children.
func cleanUp(opts Options, res *Result) {
	children, err := reap.Claim(func() (*reap.Children, error) { return reap.NewChildren(), nil })
	if err != nil {
		res.Err = errors.Join(res.Err, err)
		return
	}
	defer reap.Release()
	defer children.Close([]string{"/bin/sh", "-c", ":"})
	k := kill.Policy{Log: opts.Logger, Timeout: opts.CloseTimeout}
	errs := []error{res.Err}
	var slice *cgroup.Slice
	if res.Instance.Slice != "" {
		if s, err := cgroup.OpenSlice(res.Instance.Slice); err == nil {
			slice = s
			pids, _ := s.Pids()
			for _, p := range pids {
				res.Killed = append(res.Killed, proc.Describe(p))
			}
		} else if !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
		}
	}
	// cgroup.kill reaches what forks while it runs; the walk below this process reaches what left
	// the slice.
	below, _, err := k.Everything(context.Background(), kill.Everything{Self: os.Getpid(), Slice: slice})
	res.Killed = append(res.Killed, below...)
	if err != nil {
		errs = append(errs, err)
	}
	if slice != nil {
		errs = append(errs, slice.Remove())
	}
	if d := res.Instance.StateDir; d != "" {
		errs = append(errs, removeState(d))
	}
	res.Err = errors.Join(errs...)
}

// lastRecord returns the last record among a server's announcements; Clean and anything else that is
// not a record are passed over.
func lastRecord(lines []string) instance.Record {
	var last instance.Record
	for _, l := range lines {
		var in instance.Record
		if err := json.Unmarshal([]byte(l), &in); err == nil {
			last = in
		}
	}
	return last
}

// removeState removes an instance's state directory at path: relative to the directory it is in,
// which must be this user's alone as a Reaper's is (see instance.OpenStateDir), and only a name that
// is an instance's.
func removeState(path string) error {
	if _, ok := instance.FromDirName(filepath.Base(path)); !ok {
		return fmt.Errorf("remove state directory %s: not an instance's", path)
	}
	base, err := safefs.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer base.Close()
	return base.RemoveAll(filepath.Base(path))
}
