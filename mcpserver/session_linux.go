package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session owns the life of one client's reaper session, from the first request that names it to
// its end, whatever carries it (see kind): a stdio connection, an HTTP session, or a workspace of
// protocol 2026-07-28. The Server's index holds it from that first request until it is gone and, for
// an MCP session, until the SDK has closed that session too; end is the one way to end it.
//
// Its states, all changed under Server.mu:
//
//	idle     Requests have come, no tool call yet: there is nothing to kill. An HTTP session's
//	         requests are counted for its lease from here on. (A workspace is never idle.)
//	opening  The first tool call, or workspace_open, creates the reaper session (Reaper.NewSession,
//	         outside mu); other calls, and end, wait on opened.
//	live     The reaper session exists; the lease (HTTP sessions and workspaces) and the keepalive
//	         (MCP sessions, KeepAlive > 0) run.
//	ending   The teardown runs (reaper.Session.CloseFor): tool calls are refused and the front
//	         answers 404; Hurry cuts its grace period short.
//	gone     The teardown is done (or there was none); ended is closed. The MCP session is closed
//	         (see closeConnLocked), and the watcher drops the session from the index once it is; a
//	         workspace, which has no MCP session, leaves the index at once.
//
// Transitions:
//
//	idle → opening   a tool call (open), unless the Server is closing.
//	→ opening        workspace_open, unless the Server is closing or the identity is at its limit.
//	opening → live   NewSession succeeded (create); if it failed, back to idle (the call gets its
//	                 error, a later call tries again), or for a workspace to gone.
//	idle → gone      end with nothing to kill: the watcher (the MCP session closed) or Close.
//	live → ending    end(reason), from DELETE, workspace_close, the lease, the keepalive, the watcher
//	                 or Close (see endReason). An end of an opening session first waits for it.
//	ending → gone    the teardown returned: every process is dead, or listed as left after the
//	                 reaper's deadline. Later ends wait for it and return its error.
//
// The first end's reason is the one kept. Whoever moves a session to gone closes its MCP session
// (in a goroutine: closing waits for the session's tool calls, which return now that their processes
// are dead), but for a DELETE that waited for the teardown and saw it end: it hands the MCP session
// to the SDK, which closes it and answers 204 (deleteWaits says a DELETE is waiting).
type session struct {
	// The fields up to mu are fixed at creation.
	key     key
	ss      *mcp.ServerSession // the MCP session; nil for a workspace
	owner   string             // the identity that made it ("" without authentication)
	created time.Time          // its first request
	// stop is cancelled when the session leaves live: its lease and keepalive return on it, and a
	// ping under way is cut short.
	stop       context.Context
	cancelStop context.CancelFunc
	ended      chan struct{} // closed on the move to gone; err is set before
	retired    chan struct{} // closed when the session is gone and out of the index (see retireLocked)

	// Guarded by Server.mu.
	state       state
	version     string             // the protocol version its requests name in _meta, bounded (for the observer)
	opened      chan struct{}      // made by each opening, closed when it ends
	rs          *reaper.Session    // set on the move to live, kept after
	reason      endReason          // why it ended; set when its end begins
	err         error              // the teardown's error
	hurry       context.CancelFunc // cuts the teardown's grace period short; set while ending
	deleteWaits bool               // a DELETE waits for the teardown (see delete)
	connClosed  bool               // the MCP session is closed, or being closed, or handed to the SDK to close
	inFlight    int                // requests (HTTP) or calls (workspace) whose connection is still open
	last        time.Time          // when the last request began or ended
	input       *sdkfix.Stdio      // a stdio connection's transport, for its end of input (see disconnected); nil for others
}

// kind is what carries a session.
type kind uint8

const (
	kindConn      kind = iota + 1 // a connection of its own: stdio (or an in-memory transport, in tests)
	kindHTTP                      // a Streamable HTTP session, named by its Mcp-Session-Id
	kindWorkspace                 // a workspace of protocol 2026-07-28, named by its handle
)

// key is a session's place in the Server's index.
type key struct {
	kind kind
	conn *mcp.ServerSession // kindConn: the connection's MCP session
	id   string             // kindHTTP: the Mcp-Session-Id; kindWorkspace: the handle
}

// keyOf is the key of the session an MCP session carries: stdio sessions have no id.
func keyOf(ss *mcp.ServerSession) key {
	if id := ss.ID(); id != "" {
		return key{kind: kindHTTP, id: id}
	}
	return key{kind: kindConn, conn: ss}
}

// state is where a session is in its life (see session).
type state uint8

const (
	stateIdle state = iota
	stateOpening
	stateLive
	stateEnding
	stateGone
)

var errShuttingDown = errors.New("the server is shutting down")

func newSession(k key, ss *mcp.ServerSession, owner string) *session {
	now := time.Now()
	st := &session{key: k, ss: ss, owner: owner, created: now, last: now, ended: make(chan struct{}), retired: make(chan struct{})}
	st.stop, st.cancelStop = context.WithCancel(context.Background())
	return st
}

// name is the name the session goes by outside the MCP layer (reaper's logs, its state directory,
// `reaper ps`): an HTTP session's is "mcp-", a workspace's "ws-", then the first 12 hex digits of the
// SHA-256 of its Mcp-Session-Id or handle, which is a credential and must not be logged (the client
// can compute the name: printf %s "$ID" | sha256sum | cut -c1-12). A stdio session's is random.
func (st *session) name() string {
	sum := sha256.Sum256([]byte(st.key.id))
	switch st.key.kind {
	case kindHTTP:
		return "mcp-" + hex.EncodeToString(sum[:6])
	case kindWorkspace:
		return "ws-" + hex.EncodeToString(sum[:6])
	}
	return "stdio-" + rand.Text()[:12]
}

// track returns the session ss carries, making it, and starting its watcher, on the session's first
// request; nil once the Server is closing, for an MCP session it does not know. version is the
// protocol version the request names in its _meta, if any.
func (s *Server) track(ss *mcp.ServerSession, owner, version string) *session {
	k := keyOf(ss)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.sessions[k]; st != nil {
		if st.version == "" {
			st.version = version
		}
		return st
	}
	st := newSession(k, ss, owner)
	st.version = version
	if !s.goLocked(func() { s.watch(st) }) {
		return nil
	}
	s.sessions[k] = st
	if held := s.reserved[owner]; len(held) > 0 {
		s.dropTicketLocked(owner, held[0]) // the oldest of the initializes' reservations is this record now
	}
	return st
}

// open makes st live for a tool call: on the first call it creates the reaper session; it waits for
// an opening under way; it refuses a session whose end has begun.
func (s *Server) open(ctx context.Context, st *session) error {
	for {
		s.mu.Lock()
		switch st.state {
		case stateLive:
			s.mu.Unlock()
			return nil
		case stateEnding, stateGone:
			// Refused: a call let in now would start a reaper session inside an MCP session that ends.
			why := st.reason.describe(s.opts.IdleTimeout)
			s.mu.Unlock()
			return fmt.Errorf("this session has ended (%s); connect again for a new one", why)
		case stateOpening:
			opened := st.opened
			s.mu.Unlock()
			select {
			case <-opened:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if s.closing {
			s.mu.Unlock()
			return errShuttingDown
		}
		st.state, st.opened = stateOpening, make(chan struct{})
		s.mu.Unlock()
		return s.create(st)
	}
}

// create makes the reaper session of an opening session and moves it to live, starting its lease
// and keepalive; if that fails, back to idle, or a workspace to gone.
func (s *Server) create(st *session) error {
	name := st.name()
	rs, err := s.opts.Reaper.NewSession(name, reaper.SessionOptions{OnTaskEnd: func(ti reaper.TaskInfo) { s.taskEnded(st, ti) }})
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(st.opened)
	if err != nil {
		st.state = stateIdle
		if st.ss == nil { // a workspace nobody has seen: out of the index at once, unreported
			st.state = stateGone
			st.cancelStop()
			close(st.ended)
			close(st.retired)
			delete(s.sessions, st.key)
		}
		return err
	}
	// If the Server is closing, Close, which waited for this opening, tears it down next.
	st.rs, st.state, st.last = rs, stateLive, time.Now()
	if st.key.kind != kindConn {
		s.goLocked(func() { s.lease(st) })
	}
	if s.opts.KeepAlive > 0 && st.ss != nil {
		s.goLocked(func() { s.keepalive(st) })
	}
	if st.key.kind == kindWorkspace {
		s.log.Info("workspace opened", "workspace", name, "owner", st.owner)
	} else {
		s.log.Info("session started", "session", name, "owner", st.owner)
	}
	return nil
}

// end ends st for reason and returns the teardown's error once it is done: the one way a session
// ends (see session). A session already ending or gone keeps its first reason, and end waits for its
// teardown. Cancelling ctx cuts the grace period short.
func (s *Server) end(ctx context.Context, st *session, reason endReason) error {
	s.mu.Lock()
	for st.state == stateOpening { // Reaper.NewSession does not block: opened closes soon
		opened := st.opened
		s.mu.Unlock()
		<-opened
		s.mu.Lock()
	}
	switch st.state {
	case stateIdle:
		st.state, st.reason = stateGone, reason
		st.cancelStop()
		close(st.ended)
		s.closeConnLocked(st)
		s.mu.Unlock()
		return nil
	case stateEnding, stateGone:
		s.mu.Unlock()
		<-st.ended
		return st.err // set before ended was closed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st.state, st.reason, st.hurry = stateEnding, reason, cancel
	st.cancelStop()
	s.mu.Unlock()

	_, err := st.rs.CloseFor(ctx, reason.String()) // which logs the end

	s.mu.Lock()
	defer s.mu.Unlock()
	st.state, st.err, st.hurry = stateGone, err, nil
	close(st.ended)
	switch {
	case st.ss == nil:
		s.retireLocked(st) // a workspace: no MCP session to wait for
	case !st.deleteWaits:
		s.closeConnLocked(st)
	}
	return err
}

// retireLocked drops a gone session from the index and reports its life to the observer (from a
// goroutine: the observer is not called under mu).
func (s *Server) retireLocked(st *session) {
	if s.sessions[st.key] == st {
		delete(s.sessions, st.key)
	}
	close(st.retired)
	si := SessionInfo{Transport: "tcp", ProtocolVersion: st.version, Duration: time.Since(st.created)}
	if st.ss != nil {
		si.Transport = transport(st.ss)
		if v := initializeVersion(st.ss); v != "" {
			si.ProtocolVersion = v
		}
	}
	if !s.goLocked(func() { s.opts.Observer.SessionEnded(si) }) {
		s.opts.Observer.SessionEnded(si) // while closing; the observer returns promptly
	}
}

// closeConnLocked closes st's MCP session, once, in a goroutine: closing waits for the session's tool
// calls. While the Server is closing it leaves that to Close, which closes every MCP session.
func (s *Server) closeConnLocked(st *session) {
	if st.connClosed || st.ss == nil {
		return
	}
	st.connClosed = true
	s.goLocked(func() { st.ss.Close() })
}

// watch ends st when its MCP session closes (stdio EOF, the SDK's own close, a close by end or
// Close), if its end has not begun, drops it from the index and reports it to the observer.
func (s *Server) watch(st *session) {
	st.ss.Wait()
	ctx, cancel := s.disconnected(st)
	s.end(ctx, st, endDisconnected)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retireLocked(st)
}

// KeepAliveMisses is how many pings in a row a client may leave unanswered before its session ends.
const KeepAliveMisses = 3

// keepalive pings st's client every KeepAlive and ends the session when KeepAliveMisses pings in a
// row go unanswered (see sdkfix.KeepAlive). It returns when the session leaves live.
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
