package reaper

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"golang.org/x/sys/unix"
)

// Instance describes one Reaper: what it records in its state directory when it starts, for its
// guard, for a later instance that sweeps up after it if it dies, and for listings.
type Instance struct {
	// Name is "r<pid>-<start time>": the instance's slice and state directory are named after it,
	// and its tasks' markers start with it.
	Name string `json:"name"`
	// Pid and Start identify the process that runs the instance.
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"`
	// Slice is the instance's cgroup, under which every session's slice lives; empty in process
	// containment.
	Slice string `json:"slice,omitempty"`
	// StateDir is the instance's state directory (its sessions' small files).
	StateDir string `json:"state_dir"`
	// Containment is "cgroup" or "process".
	Containment string `json:"containment"`
	// PIDNamespace reports whether each session has a PID namespace of its own.
	PIDNamespace bool `json:"pid_namespace,omitempty"`
	// Started is when the instance started.
	Started time.Time `json:"started"`
}

// instanceFile is the name of the Instance record in an instance's state directory.
const instanceFile = "instance.json"

// instancePrefix starts the name of every instance's state directory.
const instancePrefix = "reaper-"

// instanceName names the instance run by the process pid that started at start (clock ticks).
func instanceName(pid int, start uint64) string {
	return "r" + strconv.Itoa(pid) + "-" + strconv.FormatUint(start, 10)
}

// parseInstanceName returns the pid and start time in an instance's name, or ok false for a name no
// instance has.
func parseInstanceName(name string) (pid int, start uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, "r")
	if !ok {
		return 0, 0, false
	}
	p, s, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(s, 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return 0, 0, false
	}
	return pid, start, true
}

// instanceAlive reports whether the instance of that name still runs: its process exists with the
// start time in the name (a reused pid has another) and is not dying.
func instanceAlive(w *proc.Walker, name string) bool {
	pid, start, ok := parseInstanceName(name)
	if !ok {
		return false
	}
	st, ok := w.Stat(pid)
	return ok && st.Start == start && !st.Dead()
}

// DefaultStateDir is where instances keep their state directories when Options.StateDir is empty:
// $XDG_RUNTIME_DIR or /dev/shm where they are memory filesystems this process may write (each
// command's shell writes a small file there as it exits, and a disk journal would add its latency to
// every command), otherwise the temporary directory.
func DefaultStateDir() string {
	for _, d := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/dev/shm"} {
		var st unix.Statfs_t
		if d != "" && unix.Statfs(d, &st) == nil && st.Type == unix.TMPFS_MAGIC && unix.Access(d, unix.W_OK) == nil {
			return d
		}
	}
	return os.TempDir()
}

// createState makes the instance's state directory below base and records the instance in it.
func createState(base string, in *Instance) error {
	in.StateDir = filepath.Join(base, instancePrefix+in.Name)
	if err := os.Mkdir(in.StateDir, 0o700); err != nil {
		in.StateDir = "" // not ours to remove
		return fmt.Errorf("state directory: %w", err)
	}
	b, err := json.Marshal(in)
	if err == nil {
		err = os.WriteFile(filepath.Join(in.StateDir, instanceFile), append(b, '\n'), 0o600)
	}
	if err != nil {
		os.RemoveAll(in.StateDir)
		return fmt.Errorf("state directory %s: %w", in.StateDir, err)
	}
	return nil
}

// readInstance reads the Instance recorded in a state directory.
func readInstance(dir string) (Instance, error) {
	var in Instance
	b, err := os.ReadFile(filepath.Join(dir, instanceFile))
	if err != nil {
		return in, err
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("%s: %w", filepath.Join(dir, instanceFile), err)
	}
	return in, nil
}
