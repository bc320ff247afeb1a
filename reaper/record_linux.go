package reaper

import (
	"sort"

	"github.com/cgreaper/reaper/internal/instance"
)

// record writes the session's record (instance.SessionRecord, for `reaper ps`) anew: when the
// session is made and whenever a task starts. Failures are not errors (the record serves listings
// only).
func (s *Session) record() {
	s.recordMu.Lock()
	defer s.recordMu.Unlock()
	rec := instance.SessionRecord{ID: s.id, Name: s.name, Created: s.created, Tasks: []instance.TaskView{}}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return // the teardown removes the directory
	}
	if s.slice != nil {
		rec.Slice = s.slice.Path()
	}
	if in := s.ns.current(); in != nil {
		rec.Init = in.Pid()
	}
	for _, t := range s.tasks {
		tr := instance.TaskView{ID: t.id, Command: shorten(t.command, instance.MaxRecordedCommand), Description: t.description,
			Pid: t.pid, Started: t.started, Background: t.isBackground()}
		if t.leaf != nil {
			tr.Leaf = t.leaf.Path()
		}
		rec.Tasks = append(rec.Tasks, tr)
	}
	s.mu.Unlock()
	sort.Slice(rec.Tasks, func(i, j int) bool { return rec.Tasks[i].Started.Before(rec.Tasks[j].Started) })
	if err := rec.Write(s.dir); err != nil {
		s.r.log.Debug("writing the session record failed", "session", s.id, "error", err)
	}
}
