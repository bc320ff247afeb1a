package mcpserver

import (
	"context"

	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
)

// KeepAliveMisses is how many pings in a row a client may leave unanswered before its session ends.
const KeepAliveMisses = 3

// keepalive pings st's client every KeepAlive and ends the session when KeepAliveMisses pings in a
// row go unanswered (see sdkfix.KeepAlive: the SDK's own keepalive would close the MCP session while
// its processes live on). It returns when the session leaves live.
func (s *Server) keepalive(st *session) {
	every := s.opts.KeepAlive
	missed := func(n int, err error) {
		s.log.Debug("keepalive ping unanswered", "session", st.rs.ID(), "misses", n, "error", err)
	}
	if sdkfix.KeepAlive(st.stop, every, KeepAliveMisses, func(ctx context.Context) error { return st.ss.Ping(ctx, nil) }, missed) {
		s.log.Info("keepalive pings unanswered: ending the session", "session", st.rs.ID(), "misses", KeepAliveMisses, "every", every)
		s.end(context.Background(), st, endKeepalive)
	}
}
