package mcpserver

import (
	"fmt"
	"slices"
)

// capRefusal is a new session or workspace refused at a cap (Options.MaxSessions and the like: each
// costs a cgroup, an init and a directory until it ends): why, for the client, and which limit, for
// the observer. A session counts from the initialize that makes it (reserve) to its end.
type capRefusal struct {
	limit string
	why   string
}

// admitLocked returns the refusal of a new session or workspace of identity who, or nil. s.mu must be
// held.
func (s *Server) admitLocked(who string, workspace bool) *capRefusal {
	total, mine, workspaces := 0, len(s.reserved[who]), 0
	for _, held := range s.reserved {
		total += len(held)
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

// ticket is a session being made (see reserve).
type ticket struct {
	used bool // the session's record took its place, or the request ended
}

// reserve counts a session of identity who that an initialize is making, until its record is made
// (track takes the identity's oldest ticket: whichever of its initializes made the record, the count
// is the same) or release is called once the SDK has handled the request without making one. It
// returns the refusal instead when the caps are reached.
func (s *Server) reserve(who string) (release func(), refused *capRefusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.admitLocked(who, false); r != nil {
		return nil, r
	}
	t := &ticket{}
	s.reserved[who] = append(s.reserved[who], t)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !t.used {
			s.dropTicketLocked(who, t)
		}
	}, nil
}

// dropTicketLocked takes t out of the count.
func (s *Server) dropTicketLocked(who string, t *ticket) {
	t.used = true
	held := slices.DeleteFunc(s.reserved[who], func(x *ticket) bool { return x == t })
	if len(held) == 0 {
		delete(s.reserved, who)
		return
	}
	s.reserved[who] = held
}
