package mcpserver

import (
	"strings"
	"time"
)

// endReason says why a session ended. It is a closed set: its words are the only values a session's
// end carries to reaper, which logs them and reports them as the reason label of
// reaper_sessions_ended_total. Whatever else there is to say about an end (how many pings went
// unanswered, say) goes to mcpserver's own log line beside it, never into the reason.
type endReason uint8

const (
	endDelete       endReason = iota + 1 // the client sent DELETE
	endIdle                              // no request for IdleTimeout
	endDisconnected                      // the connection closed: stdio EOF, the SDK's own close
	endKeepalive                         // KeepAliveMisses pings in a row went unanswered
	endShutdown                          // the server is shutting down
	endClose                             // workspace_close closed the workspace
	endExpired                           // the workspace went unused for its lease
)

// reasons are the reasons' words and what describe says of them (%v: the idle timeout), by reason.
var reasons = [...]struct{ word, why string }{
	endDelete:       {"delete", "client DELETE"},
	endIdle:         {"idle", "idle for %v"},
	endDisconnected: {"disconnected", "connection closed"},
	endKeepalive:    {"keepalive", "keepalive pings unanswered"},
	endShutdown:     {"shutdown", "server shutdown"},
	endClose:        {"close", "closed by workspace_close"},
	endExpired:      {"expired", "unused for %v"},
}

// String returns the reason's word: what reaper logs and what the metric label says.
func (r endReason) String() string {
	if int(r) < len(reasons) && reasons[r].word != "" {
		return reasons[r].word
	}
	return "unknown"
}

// describe says why a session ended, for the client that tries to use it afterwards; idle is the
// idle timeout in effect.
func (r endReason) describe(idle time.Duration) string {
	if int(r) < len(reasons) && reasons[r].why != "" {
		return strings.Replace(reasons[r].why, "%v", idle.String(), 1)
	}
	return r.String()
}
