package instance

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cgreaper/reaper/internal/safefs"
)

// Environment markers every task's processes inherit: the session's (SessionMarker) and the task's
// (EnvTask=<task id>). The /proc walks, the sweep and Inspect look for them.
const (
	EnvSession = "REAPER_SESSION"
	EnvTask    = "REAPER_TASK"
)

// SessionName names an instance's session number n ("s-3"): its slice and its state directory.
func SessionName(n int) string { return "s-" + strconv.Itoa(n) }

// ValidSessionName reports whether name is one SessionName gives: "s-" and a positive number.
func ValidSessionName(name string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "s-"))
	return err == nil && n > 0 && name == SessionName(n)
}

// SessionMarker is the environment entry the processes of the session session of the instance name
// inherit: EnvSession=<instance>/<session>. It names the session by the instance and the slice, not
// by its id: an MCP session id may be a credential, and the environment of a process is readable by
// more than its owner's client.
func SessionMarker(name, session string) string { return EnvSession + "=" + name + "/" + session }

// CheckSessionID refuses a session id that could not be recorded and shown as it is: it must be 1 to
// 128 printable ASCII characters without spaces.
func CheckSessionID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("session id must be 1 to 128 characters, got %d", len(id))
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return fmt.Errorf("session id %q: byte %q not allowed (printable ASCII without spaces)", id, id[i])
		}
	}
	return nil
}

// sessionFile is the name of a session's record in its state directory.
const sessionFile = "session.json"

// MaxRecordedCommand bounds a command as a session's record keeps it.
const MaxRecordedCommand = 256

// Bounds of a session's record as read: what a session keeps of a command, a description and a
// task id at most (package reaper's maxListedCommand, MaxDescriptionBytes and maxTaskIDBytes).
const (
	maxRecordCommand     = 1 << 10
	maxRecordDescription = 1 << 10
	maxRecordTaskID      = 64
)

// SessionRecord is what a session keeps on disk for `reaper ps`: the session's names and its tasks.
// It is readable by its owner only, and holds no environment and no MCP session id (its id is the
// non-secret name mcpserver gives it); a command, cut to MaxRecordedCommand bytes, is what
// /proc/<pid>/cmdline shows anyway while it runs.
type SessionRecord struct {
	ID      string     `json:"id"`
	Name    string     `json:"name"`
	Slice   string     `json:"slice,omitempty"`
	Init    int        `json:"init,omitempty"` // the init of the session's PID namespace
	Created time.Time  `json:"created"`
	Tasks   []TaskView `json:"tasks"`
}

// Write writes the record into the session's state directory dir, under a temporary name renamed
// over the record's, so that a reader never sees half of one.
func (rec SessionRecord) Write(dir *safefs.Dir) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return dir.WriteFile(sessionFile, append(b, '\n'))
}

// maxSessionRecord bounds a session's record as read: a task takes at most about 1.5 KiB of it (its
// description is the largest part), and a session keeps a few dozen.
const maxSessionRecord = 4 << 20

// ReadSessionRecord reads the record in a session's state directory, and checks it (see
// parseSessionRecord).
func ReadSessionRecord(dir *safefs.Dir) (SessionRecord, error) {
	b, err := dir.ReadFile(sessionFile, maxSessionRecord)
	if err != nil {
		return SessionRecord{}, err
	}
	rec, err := parseSessionRecord(b)
	if err != nil {
		return SessionRecord{}, fmt.Errorf("%s: %w", dir.Join(sessionFile), err)
	}
	return rec, nil
}

// parseSessionRecord decodes a session's record and checks that it is one a session could have
// written: a session name, an id of printable ASCII, and paths that are clean and absolute.
func parseSessionRecord(b []byte) (SessionRecord, error) {
	var rec SessionRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return SessionRecord{}, err
	}
	if !ValidSessionName(rec.Name) {
		return SessionRecord{}, fmt.Errorf("%q is not a session name", rec.Name)
	}
	if err := CheckSessionID(rec.ID); err != nil {
		return SessionRecord{}, err
	}
	if !cleanPath(rec.Slice) {
		return SessionRecord{}, fmt.Errorf("session %s: slice %q is not a clean absolute path", rec.Name, rec.Slice)
	}
	for _, t := range rec.Tasks {
		if len(t.ID) > maxRecordTaskID || !cleanPath(t.Leaf) || len(t.Command) > maxRecordCommand || len(t.Description) > maxRecordDescription {
			return SessionRecord{}, fmt.Errorf("session %s: task %q is not one a session records", rec.Name, t.ID)
		}
	}
	if rec.Tasks == nil {
		rec.Tasks = []TaskView{}
	}
	return rec, nil
}

// TaskView is a task as its session recorded it.
type TaskView struct {
	ID          string    `json:"id"`
	Command     string    `json:"command"`
	Description string    `json:"description,omitempty"`
	Background  bool      `json:"background"`
	Pid         int       `json:"pid"`
	Started     time.Time `json:"started"`
	Leaf        string    `json:"leaf,omitempty"`
}

// cleanPath reports whether p is empty or a clean absolute path shorter than maxPath.
func cleanPath(p string) bool {
	return p == "" || len(p) < maxPath && filepath.IsAbs(p) && filepath.Clean(p) == p
}
