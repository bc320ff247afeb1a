package reaper

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Bounds on what a caller can make a session keep. A command is bounded by MaxCommandBytes.
const (
	// MaxDescriptionBytes is the longest task description accepted.
	MaxDescriptionBytes = 1 << 10
	// maxTaskIDBytes bounds the task ids looked up: issued ids are "t-" and 16 hex digits.
	maxTaskIDBytes = 64
	// maxListedCommand bounds the command a finished foreground task keeps to name the processes
	// it left (see Session.List): it is kept while they live, however many commands left some.
	maxListedCommand = 1 << 10
)

// checkDescription refuses descriptions over MaxDescriptionBytes.
func checkDescription(d string) error {
	if len(d) > MaxDescriptionBytes {
		return fmt.Errorf("%w: description of %d bytes, the limit is %d: shorten it (the command itself is not bound by it)", ErrBadInput, len(d), MaxDescriptionBytes)
	}
	return nil
}

// checkTaskID refuses ids that no task can have, without repeating them whole.
func checkTaskID(id string) error {
	if len(id) > maxTaskIDBytes {
		return fmt.Errorf("%w: task id of %d bytes starting %q (ids are like t-0123456789abcdef)", ErrUnknownTask, len(id), shorten(id, 16))
	}
	return nil
}

// shorten cuts s to at most n bytes, between characters, marking the cut with "…".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// pruneFinishedLocked clears the oldest finished background tasks past MaxTasks of them, so that what
// a session keeps is bounded: at most MaxTasks running and MaxTasks finished background tasks, each
// whose output files share the session's OutputBudget. A task whose leaf still holds processes stays
// (see prune, whose lr it adds to).
func (s *Session) pruneFinishedLocked(lr *leafRelease) {
	for _, t := range s.overCapLocked() {
		if s.releaseLeafLocked(t, lr) {
			s.clearLocked(t)
		}
	}
}

// overCapLocked returns the finished background tasks past MaxTasks, the oldest first.
func (s *Session) overCapLocked() []*task {
	var finished []*task
	for _, t := range s.tasks {
		t.mu.Lock()
		if t.background && t.status.Terminal() {
			finished = append(finished, t)
		}
		t.mu.Unlock()
	}
	if len(finished) <= s.r.lim.MaxTasks {
		return nil
	}
	slices.SortFunc(finished, func(a, b *task) int { return a.endedAt().Compare(b.endedAt()) })
	return finished[:len(finished)-s.r.lim.MaxTasks]
}

func (t *task) endedAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}
