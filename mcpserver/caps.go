package mcpserver

import (
	"fmt"
)

// A server holds at most Options.MaxSessions sessions and workspaces, and one identity at most
// Options.MaxSessionsPerIdentity of them (and MaxWorkspaces workspaces): every one costs memory, a
// cgroup, an init and a directory, and is held until it ends, so one client must not be able to take
// them all. A session counts from the initialize that makes it (reserve, while the SDK handles it)
// to its end; a workspace from workspace_open.

// capRefusal is a new session or workspace refused at a cap: why, for the client, and which limit, for
// the observer.
type capRefusal struct {
	limit string
	why   string
}

// admitLocked returns the refusal of a new session or workspace of identity who, or nil. s.mu must be
// held.
func (s *Server) admitLocked(who string, workspace bool) *capRefusal {
	total, mine, workspaces := 0, s.reserved[who], 0
	for _, n := range s.reserved {
		total += n
	}
	for k, st := range s.sessions {
		total++
		if st.owner == who {
			mine++
			if k.kind == kindWorkspace {
				workspaces++
			}
		}
	}
	switch {
	case total >= s.opts.MaxSessions:
		return &capRefusal{RefusedSessions, fmt.Sprintf("reaper holds %d sessions and workspaces, the most it allows (--max-sessions): end one you no longer need (workspace_close, or close the client's session), or try again when others have ended", total)}
	case mine >= s.opts.MaxSessionsPerIdentity:
		return &capRefusal{RefusedIdentitySessions, fmt.Sprintf("your identity holds %d sessions and workspaces, the most one identity may (--max-sessions-per-identity): end one you no longer need (workspace_close, or close a session)", mine)}
	case workspace && workspaces >= s.opts.MaxWorkspaces:
		return &capRefusal{RefusedIdentitySessions, fmt.Sprintf("%d workspaces are open for your identity, the most allowed (--max-workspaces): close one with workspace_close (workspace_list lists them), or let one expire", workspaces)}
	}
	return nil
}

// reserve counts a session of identity who that an initialize is making, until release is called
// (once the SDK has handled the request: by then the session is in the index, if it was made). It
// returns the refusal instead when the caps are reached.
func (s *Server) reserve(who string) (release func(), refused *capRefusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.admitLocked(who, false); r != nil {
		return nil, r
	}
	s.reserved[who]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.reserved[who]--; s.reserved[who] <= 0 {
			delete(s.reserved, who)
		}
	}, nil
}
