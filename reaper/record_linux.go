package reaper

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"time"
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
	tmp := filepath.Join(s.tmp, "."+sessionFile)
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		s.r.log.Debug("writing the session record failed", "session", s.id, "error", err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(s.tmp, sessionFile)); err != nil {
		s.r.log.Debug("writing the session record failed", "session", s.id, "error", err)
	}
}

// readSessionRecord reads the record in a session's state directory.
func readSessionRecord(dir string) (sessionRecord, error) {
	var rec sessionRecord
	b, err := os.ReadFile(filepath.Join(dir, sessionFile))
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(b, &rec)
}
