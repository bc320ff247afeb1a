package instance

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/safefs"
	"golang.org/x/sys/unix"
)

// Record describes one instance (a Reaper): what it records in its state directory when it starts,
// for its guard, for a later instance that sweeps up after it if it dies, and for listings.
type Record struct {
	// Name is "r<pid>-<start time>" (see Name), after the process that runs the instance.
	Name  string `json:"name"`
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"`
	// Slice is the instance's cgroup, the parent of its sessions'; empty in process containment.
	Slice string `json:"slice,omitempty"`
	// RootMade are the cgroups the instance made for the root its slice is below (the root and the
	// parents that were missing; cgroup.Root.Made), top first: a sweep after its death removes
	// those that are empty (cgroup.Root.RemoveMade).
	RootMade     []string  `json:"root_made,omitempty"`
	StateDir     string    `json:"state_dir"`               // the instance's state directory
	Containment  string    `json:"containment"`             // ContainCgroup or ContainProcess
	PIDNamespace bool      `json:"pid_namespace,omitempty"` // each session has a PID namespace of its own
	Started      time.Time `json:"started"`
}

// The containment modes a Record names.
const (
	ContainCgroup  = "cgroup"
	ContainProcess = "process"
)

// RecordFile is the name of the Record in an instance's state directory.
const RecordFile = "instance.json"

// instancePrefix starts the name of every instance's state directory.
const instancePrefix = "reaper-"

// Name names the instance run by the process pid that started at start (clock ticks).
func Name(pid int, start uint64) string {
	return "r" + strconv.Itoa(pid) + "-" + strconv.FormatUint(start, 10)
}

// DirName is the name of the state directory of the instance name, in the state directory.
func DirName(name string) string { return instancePrefix + name }

// FromDirName returns the name of the instance whose state directory is named dir, and false for a
// name that is no instance's state directory's (see DirName).
func FromDirName(dir string) (string, bool) {
	name, ok := strings.CutPrefix(dir, instancePrefix)
	if _, _, valid := ParseName(name); !ok || !valid {
		return "", false
	}
	return name, true
}

// ParseName returns the pid and start time in an instance's name, or ok false for a name no
// instance has: only the exact form Name gives ("r12-34", no sign, no leading zero).
func ParseName(name string) (pid int, start uint64, ok bool) {
	p, s, ok := strings.Cut(strings.TrimPrefix(name, "r"), "-")
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(s, 10, 64)
	if !ok || err1 != nil || err2 != nil || pid <= 0 || pid > maxPid || Name(pid, start) != name {
		return 0, 0, false
	}
	return pid, start, true
}

// maxPid is the largest pid the kernel hands out (PID_MAX_LIMIT).
const maxPid = 1 << 22

// Alive reports whether the instance of that name still runs: its process exists with the start
// time in the name (a reused pid has another) and is not dying.
func Alive(w *proc.Walker, name string) bool {
	pid, start, ok := ParseName(name)
	if !ok {
		return false
	}
	st, ok := w.Stat(pid)
	// A process killed, whose threads are still exiting, is dead already: nothing comes after it to
	// sweep up what it left.
	return ok && st.Start == start && !st.Dead() && !w.Doomed(st)
}

// DefaultStateDir is where instances keep their state directories when none is given:
// the first of stateDirs() that exists, or the first of them where none does. It makes nothing.
func DefaultStateDir() string {
	dirs := stateDirs()
	for _, d := range dirs {
		if _, err := os.Lstat(d); err == nil {
			return d
		}
	}
	return dirs[0]
}

// stateDirs are the places, in order of preference, of reaper's own state directory: for root
// /run/reaper, for others $XDG_RUNTIME_DIR/reaper (memory file systems made for this, private to
// their owner); then a directory of this user's own in the temporary directory and in /dev/shm
// (reaper-<uid>, as tmux does: never the world-writable directory itself).
func stateDirs() []string {
	var dirs []string
	if os.Geteuid() == 0 {
		dirs = append(dirs, "/run/reaper")
	} else if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		dirs = append(dirs, filepath.Join(x, "reaper"))
	}
	own := "reaper-" + strconv.Itoa(os.Geteuid())
	return append(dirs, filepath.Join(os.TempDir(), own), filepath.Join("/dev/shm", own))
}

// OpenStateDir opens the directory instances keep their state directories in: dir, made (mode 0700)
// if it is missing, or where dir is empty the first of stateDirs() that can be made or opened.
// Whatever it opens must be this user's and writable by nobody else (see safefs.OpenRoot): a
// directory that is not is refused with an error naming it and why, never fallen back from. A
// default is passed over only where it cannot be had at all (its parent is missing, read-only, not
// writable, or open to others without the sticky bit: a Kubernetes emptyDir /tmp).
func OpenStateDir(dir string) (*safefs.Dir, error) {
	if dir != "" {
		d, err := safefs.CreateRoot(dir)
		if err != nil {
			return nil, fmt.Errorf("state directory: %w (choose one that only reaper's user can write)", err)
		}
		return d, nil
	}
	var errs []error
	for _, c := range stateDirs() {
		d, err := safefs.CreateRoot(c)
		if err == nil {
			return d, nil
		}
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == c && !errors.Is(err, os.ErrNotExist) &&
			!errors.Is(err, unix.EROFS) && !errors.Is(err, unix.EACCES) {
			// The directory is there, and not ours: someone else made it.
			return nil, fmt.Errorf("state directory: %w (remove it, or give --state-dir)", err)
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no usable state directory (give --state-dir): %w", errors.Join(errs...))
}

// LookStateDir opens the directory OpenStateDir would use, for a process that only looks: dir, or
// the default that exists. It returns nil, nil where there is none.
func LookStateDir(dir string) (*safefs.Dir, error) {
	if dir == "" {
		dir = DefaultStateDir()
	}
	d, err := safefs.OpenRoot(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state directory: %w; its records are not read", err)
	}
	return d, nil
}

// maxInstanceRecord bounds a Record as read: a real one is a few hundred bytes.
const maxInstanceRecord = 64 << 10

// Create makes the instance's state directory in base and records the instance in it. The
// directory is returned open; in.StateDir is set to its path.
func Create(base *safefs.Dir, in *Record) (*safefs.Dir, error) {
	name := DirName(in.Name)
	if err := base.Mkdir(name); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	in.StateDir = base.Join(name)
	dir, err := base.OpenDir(name)
	if err != nil {
		err = fmt.Errorf("state directory: %w", err)
	} else if err = Rewrite(dir, *in); err != nil {
		dir.Close()
	}
	if err != nil {
		base.RemoveAll(name)
		in.StateDir = ""
		return nil, err
	}
	return dir, nil
}

// Rewrite replaces the record in the instance's state directory dir (as Create returned it) with in,
// for what the instance learnt after Create; a reader sees the old record or the new one.
func Rewrite(dir *safefs.Dir, in Record) error {
	b, _ := json.Marshal(in)
	if err := dir.WriteFile(RecordFile, append(b, '\n')); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	return nil
}

// ReadRecord reads the Record in dir, the state directory of the instance name, and checks it (see
// parseInstance).
func ReadRecord(dir *safefs.Dir, name string) (Record, error) {
	b, err := dir.ReadFile(RecordFile, maxInstanceRecord)
	if err != nil {
		return Record{}, err
	}
	in, err := parseInstance(b)
	if err == nil && in.Name != name {
		err = fmt.Errorf("it names instance %q", in.Name)
	}
	if err != nil {
		return Record{}, fmt.Errorf("%s: %w", dir.Join(RecordFile), err)
	}
	return in, nil
}

// parseInstance decodes a Record and checks that it is one reaper could have written: a valid
// instance name that agrees with its pid and start time, a known containment mode, and clean
// absolute paths. A record is data, not authority: what it names is checked again before use.
func parseInstance(b []byte) (Record, error) {
	var in Record
	if err := json.Unmarshal(b, &in); err != nil {
		return Record{}, err
	}
	pid, start, ok := ParseName(in.Name)
	switch {
	case !ok:
		return Record{}, fmt.Errorf("%q is not an instance name", in.Name)
	case pid != in.Pid || start != in.Start:
		return Record{}, fmt.Errorf("instance %s records pid %d and start %d", in.Name, in.Pid, in.Start)
	case in.Containment != ContainCgroup && in.Containment != ContainProcess:
		return Record{}, fmt.Errorf("instance %s: unknown containment %q", in.Name, in.Containment)
	case !cleanPath(in.Slice):
		return Record{}, fmt.Errorf("instance %s: slice %q is not a clean absolute path", in.Name, in.Slice)
	case len(in.StateDir) > maxPath:
		return Record{}, fmt.Errorf("instance %s: state directory path too long", in.Name)
	case len(in.RootMade) > maxRootMade:
		return Record{}, fmt.Errorf("instance %s: %d cgroups made for its root, more than a root has parents", in.Name, len(in.RootMade))
	}
	if len(in.RootMade) == 0 {
		in.RootMade = nil // as the record is written
	}
	for _, d := range in.RootMade {
		if d == "" || !cleanPath(d) {
			return Record{}, fmt.Errorf("instance %s: a cgroup made for its root, %q, is not a clean absolute path", in.Name, d)
		}
	}
	return in, nil
}

// maxRootMade bounds the cgroups a record says its instance made for its root: a path of maxPath
// bytes has fewer parents.
const maxRootMade = maxPath / 2

// maxPath is the longest path the kernel resolves (PATH_MAX, its terminating NUL included).
const maxPath = unix.PathMax

// TokenFile is the file in the state directory that holds reaper's own token.
const TokenFile = "token"

// maxStateToken bounds the token file as read: a token and its newline.
const maxStateToken = 4 << 10

// StateToken returns reaper's own bearer token, for an HTTP listener with no token configured, and
// the path of the file that holds it in the state directory stateDir ("" for the default): made on
// first use (or when it does not hold a token), kept across restarts, and shared by the instances
// that share the directory. The file is reaper's user's, mode 0600, replaced (never written through)
// when made; where two instances make it at once, both use what the file holds once they are done.
func StateToken(stateDir string) (token, path string, err error) {
	d, err := OpenStateDir(stateDir)
	if err != nil {
		return "", "", err
	}
	defer d.Close()
	path = d.Join(TokenFile)
	b, err := d.ReadFile(TokenFile, maxStateToken)
	if err == nil {
		if tok, ok := parseStateToken(b); ok {
			return tok, path, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", path, fmt.Errorf("token file: %w", err)
	}
	// 130 random bits, in base32 (rand.Text): letters and digits only, safe in any header or shell.
	if err := d.WriteFile(TokenFile, []byte(rand.Text()+"\n")); err != nil {
		return "", path, fmt.Errorf("token file: %w", err)
	}
	if b, err = d.ReadFile(TokenFile, maxStateToken); err != nil {
		return "", path, fmt.Errorf("token file: %w", err)
	}
	tok, ok := parseStateToken(b)
	if !ok {
		return "", path, fmt.Errorf("token file %s: does not hold a token after it was written", path)
	}
	return tok, path, nil
}

// parseStateToken returns the token a token file holds: its first line, which must be at least 16
// printable ASCII characters without spaces.
func parseStateToken(b []byte) (string, bool) {
	line, _, _ := strings.Cut(string(b), "\n")
	if len(line) < 16 {
		return "", false
	}
	for _, c := range []byte(line) {
		if c <= ' ' || c >= 0x7f {
			return "", false
		}
	}
	return line, true
}
