package mcpserver

import (
	"context"
	"sync"
	"time"

	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is the reaper side of one MCP session. Over HTTP it is made by the first request that
// carries its Mcp-Session-Id (to count that request for the idle lease) and claimed by its first tool
// call; over stdio, by its first tool call.
type session struct {
	id    string        // Mcp-Session-Id, or empty over stdio; fixed at creation
	ended chan struct{} // closed when the teardown is complete
	// stop is cancelled when the teardown begins: the session's goroutines (lease, keepalive) end on
	// it, and the calls they make (keepalive pings) are cut short; cancelStop cancels it.
	stop       context.Context
	cancelStop context.CancelFunc

	// open runs once: it creates rs and starts the session's goroutines. openErr is its result.
	open    sync.Once
	openErr error
	// rs is set by open, before any goroutine of the session starts.
	rs *reaper.Session

	// once runs the teardown; err is its result, set before ended is closed.
	once sync.Once
	err  error
	// closeOnce closes the MCP session.
	closeOnce sync.Once

	// Guarded by Server.mu.
	ss       *mcp.ServerSession // set when a tool call claims the session
	owner    string             // the identity that created it ("" without authentication)
	why      string             // why the session ended; set when the teardown begins
	inFlight int                // HTTP requests whose connection is still open
	last     time.Time          // when the last request began or ended
}

func newSession(id string) *session {
	st := &session{id: id, ended: make(chan struct{}), last: time.Now()}
	st.stop, st.cancelStop = context.WithCancel(context.Background())
	return st
}
