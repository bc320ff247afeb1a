package mcpserver

import (
	"fmt"
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

// reasonWords are the reasons' words, by reason.
var reasonWords = [...]string{
	endDelete:       "delete",
	endIdle:         "idle",
	endDisconnected: "disconnected",
	endKeepalive:    "keepalive",
	endShutdown:     "shutdown",
	endClose:        "close",
	endExpired:      "expired",
}

// String returns the reason's word: what reaper logs and what the metric label says.
func (r endReason) String() string {
	if int(r) < len(reasonWords) && reasonWords[r] != "" {
		return reasonWords[r]
	}
	return "unknown"
}

// describe says why a session ended, for the client that tries to use it afterwards; idle is the
// idle timeout in effect.
func (r endReason) describe(idle time.Duration) string {
	switch r {
	case endDelete:
		return "client DELETE"
	case endIdle:
		return fmt.Sprintf("idle for %v", idle)
	case endDisconnected:
		return "connection closed"
	case endKeepalive:
		return "keepalive pings unanswered"
	case endShutdown:
		return "server shutdown"
	case endClose:
		return "closed by workspace_close"
	case endExpired:
		return fmt.Sprintf("unused for %v", idle)
	}
	return r.String()
}
