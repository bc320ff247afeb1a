package mcpserver

import (
	"context"
	"time"
)

// KeepAliveMisses is how many pings in a row a client may leave unanswered before its session ends.
const KeepAliveMisses = 3

// keepalive pings st's client every KeepAlive and ends the session when KeepAliveMisses pings in a
// row go unanswered. Each ping may take a whole interval to be answered, and a slow answer is a miss,
// not an end: a client that is briefly busy (a garbage collection, a laptop waking up, a loaded
// machine) keeps its session, where the SDK's own keepalive ends it at the first ping not answered
// within half the interval. Pings follow each other without overlapping, so a client that vanished
// without closing its connection loses its session about KeepAliveMisses+1 intervals after its last
// answer. It returns when the session leaves live.
func (s *Server) keepalive(st *session) {
	every := s.opts.KeepAlive
	tick := time.NewTicker(every)
	defer tick.Stop()
	misses := 0
	for {
		select {
		case <-st.stop.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(st.stop, every)
		err := st.ss.Ping(ctx, nil)
		cancel()
		if st.stop.Err() != nil {
			return
		}
		if err == nil {
			misses = 0
			continue
		}
		misses++
		s.log.Debug("keepalive ping unanswered", "session", st.rs.ID(), "misses", misses, "error", err)
		if misses >= KeepAliveMisses {
			s.log.Info("keepalive pings unanswered: ending the session", "session", st.rs.ID(), "misses", misses, "every", every)
			s.end(context.Background(), st, endKeepalive)
			return
		}
	}
}
