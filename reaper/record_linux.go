package reaper

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cgreaper/reaper/internal/safefs"
)

// sessionFile is the name of a session's record in its state directory.
const sessionFile = "session.json"

// maxRecordedCommand bounds a command as the session's record keeps it.
const maxRecordedCommand = 256

// sessionRecord is what a session keeps on disk for `reaper ps`, which reads it without asking the
// Reaper (that may be wedged or stopped): the session's names and its tasks. It is small, readable by
// its owner only, and holds no environment and no MCP session id (the id a Session has is already
// the non-secret name mcpserver gives it); a command, cut to 256 bytes, is what /proc/<pid>/cmdline
// shows anyway while it runs.
type sessionRecord struct {
	ID      string     `json:"id"`
	Name    string     `json:"name"`
	Slice   string     `json:"slice,omitempty"`
	Init    int        `json:"init,omitempty"` // the init of the session's PID namespace
	Created time.Time  `json:"created"`
	Tasks   []TaskView `json:"tasks"`
}

// record writes the session's record anew: when the session is made and whenever a task starts.
// It writes a temporary file and renames it, so that a reader never sees half of one. Failures are
// not errors (the record serves listings only); lock order: recordMu, then Session.mu, then task.mu.
func (s *Session) record() {
	s.recordMu.Lock()
	defer s.recordMu.Unlock()
	rec := sessionRecord{ID: s.id, Name: s.name, Created: s.created, Tasks: []TaskView{}}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return // the teardown removes the directory
	}
	if s.slice != nil {
		rec.Slice = s.slice.Path()
	}
	if s.ns != nil {
		rec.Init = s.ns.Pid()
	}
	for _, t := range s.tasks {
		tr := TaskView{ID: t.id, Command: t.command, Description: t.description, Pid: t.pid, Started: t.started, Background: t.isBackground()}
		if len(tr.Command) > maxRecordedCommand {
			tr.Command = tr.Command[:maxRecordedCommand-3] + "..."
		}
		if t.leaf != nil {
			tr.Leaf = t.leaf.Path()
		}
		rec.Tasks = append(rec.Tasks, tr)
	}
	s.mu.Unlock()
	sort.Slice(rec.Tasks, func(i, j int) bool { return rec.Tasks[i].Started.Before(rec.Tasks[j].Started) })
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	if err := s.dir.WriteFile(sessionFile, append(b, '\n')); err != nil {
		s.r.log.Debug("writing the session record failed", "session", s.id, "error", err)
	}
}

// maxSessionRecord bounds a session's record as read: a task takes at most about 1.5 KiB of it (its
// description is the largest part), and a session keeps a few dozen.
const maxSessionRecord = 4 << 20

// readSessionRecord reads the record in a session's state directory.
func readSessionRecord(dir *safefs.Dir) (sessionRecord, error) {
	b, err := dir.ReadFile(sessionFile, maxSessionRecord)
	if err != nil {
		return sessionRecord{}, err
	}
	rec, err := parseSessionRecord(b)
	if err != nil {
		return sessionRecord{}, fmt.Errorf("%s: %w", dir.Join(sessionFile), err)
	}
	return rec, nil
}

// parseSessionRecord decodes a session's record and checks that it is one a session could have
// written: a session name ("s-<n>"), an id of printable ASCII, and paths that are clean and absolute.
// It is only ever shown (reaper ps), never acted on.
func parseSessionRecord(b []byte) (sessionRecord, error) {
	var rec sessionRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return sessionRecord{}, err
	}
	if !validSessionName(rec.Name) {
		return sessionRecord{}, fmt.Errorf("%q is not a session name", rec.Name)
	}
	if err := checkID(rec.ID); err != nil {
		return sessionRecord{}, err
	}
	if !cleanPath(rec.Slice) {
		return sessionRecord{}, fmt.Errorf("session %s: slice %q is not a clean absolute path", rec.Name, rec.Slice)
	}
	for _, t := range rec.Tasks {
		if checkTaskID(t.ID) != nil || !cleanPath(t.Leaf) || len(t.Command) > maxListedCommand || len(t.Description) > MaxDescriptionBytes {
			return sessionRecord{}, fmt.Errorf("session %s: task %q is not one a session records", rec.Name, t.ID)
		}
	}
	if rec.Tasks == nil {
		rec.Tasks = []TaskView{}
	}
	return rec, nil
}

// validSessionName reports whether name is one NewSession gives: "s-" and a positive number.
func validSessionName(name string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "s-"))
	return err == nil && n > 0 && name == "s-"+strconv.Itoa(n)
}

// cleanPath reports whether p is empty or a clean absolute path of at most maxPath bytes.
func cleanPath(p string) bool {
	return p == "" || len(p) < maxPath && filepath.IsAbs(p) && filepath.Clean(p) == p
}
