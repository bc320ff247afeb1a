package mcpserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultIdleTimeout ends an HTTP session that has had no request for this long.
const DefaultIdleTimeout = 10 * time.Minute

// StdioCloseGrace caps the grace period of a session whose stdio client closed the connection. MCP
// clients end a stdio server by closing its input, then send SIGTERM if it has not exited "within a
// reasonable time" and SIGKILL after that; the TypeScript SDK waits 2 s before SIGTERM. With the grace
// capped at a second, reaper has torn everything down and exited before that SIGTERM comes.
const StdioCloseGrace = time.Second

// Options configures a Server. Reaper is required; the zero value of every other field is a
// documented default.
type Options struct {
	// Reaper runs the sessions' commands; its Limits are what the tool descriptions tell agents. The
	// Server does not close it.
	Reaper *reaper.Reaper
	// IdleTimeout ends an HTTP session that has had no request (and no request in flight on a
	// live connection) for this long, killing its processes. Zero means DefaultIdleTimeout; stdio
	// sessions end with their connection instead.
	IdleTimeout time.Duration
	// KeepAlive, if positive, pings the client of each session that ran a tool this often; a
	// session whose client leaves KeepAliveMisses pings in a row unanswered ends (see keepalive).
	KeepAlive time.Duration
	// Version is reported to clients as the server's version.
	Version string
	// Logger receives session starts and the SDK's warnings; each session's end is logged by the
	// Reaper, with the reason given here. Nil discards.
	Logger *slog.Logger
	// Observer is told of every MCP request and session, for metrics. Nil observes nothing.
	Observer Observer
}

// Server is an MCP server whose sessions run commands through a Reaper. It is safe for concurrent
// use. Close it to end every session.
//
// Lock order: Server.mu is a leaf. No reaper call, network call or file-system work happens while it
// is held.
type Server struct {
	// The fields up to wg are fixed at creation.
	opts Options
	log  *slog.Logger
	mcp  *mcp.Server
	// budget caps the output a tool result carries (see outputBudget).
	budget reaper.Budget
	// wg counts the goroutines the Server starts: session watchers, leases, keepalives, MCP session
	// closers and notifications. Each is added under mu while closing is false, so Close's Wait sees
	// them all.
	wg sync.WaitGroup

	// mu guards the fields that follow, and the mutable fields of every session.
	mu sync.Mutex
	// sessions is the index of the sessions that ran a tool, by MCP session.
	sessions map[*mcp.ServerSession]*session
	// byID indexes HTTP sessions by Mcp-Session-Id: the same sessions, and records of requests in
	// flight for ids that have no session yet (for the idle lease; dropped when they end).
	byID map[string]*session
	// hurry cancels the teardowns under way (see Hurry).
	hurry map[*session]context.CancelFunc
	// followed are the MCP sessions whose end the observer waits for (see follow).
	followed map[*mcp.ServerSession]bool
	closing  bool
}

// New returns a server with the bash, task_output, task_stop and task_list tools.
func New(opts Options) (*Server, error) {
	if opts.Reaper == nil {
		return nil, errors.New("mcpserver: Options.Reaper is required")
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	s := &Server{
		opts: opts, log: opts.Logger,
		sessions: make(map[*mcp.ServerSession]*session),
		byID:     make(map[string]*session),
		hurry:    make(map[*session]context.CancelFunc),
		followed: make(map[*mcp.ServerSession]bool),
	}
	lim := opts.Reaper.Limits()
	s.budget = outputBudget(lim.OutputLimit)
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "reaper", Title: "reaper: shell commands that never outlive the session", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions(lim, opts.IdleTimeout),
		Logger:       sdkLogger(opts.Logger), // no KeepAlive: the Server's own (see keepalive)
	})
	s.addTools(lim)
	s.mcp.AddReceivingMiddleware(encodeOnce, s.observe) // observe sees *mcp.CallToolResult
	return s, nil
}

// sessionFor returns the session of the MCP session req came on, opening its reaper session on the
// first tool call.
func (s *Server) sessionFor(req *mcp.CallToolRequest) (*session, error) {
	st, err := s.claim(req)
	if err != nil {
		return nil, err
	}
	st.open.Do(func() { st.openErr = s.open(st) })
	if st.openErr != nil {
		return nil, st.openErr
	}
	s.mu.Lock()
	why := st.why
	s.mu.Unlock()
	if why != "" {
		// The MCP session is being closed; a call that slipped in must not start a new reaper
		// session in it.
		return nil, fmt.Errorf("this session has ended (%s); connect again for a new one", why)
	}
	return st, nil
}

// claim finds or makes the record of req's MCP session: the one its earlier calls made, the record of
// its requests in flight (HTTP), or a new one.
func (s *Server) claim(req *mcp.CallToolRequest) (*session, error) {
	ss := req.Session
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.sessions[ss]; st != nil {
		return st, nil
	}
	if s.closing {
		return nil, errors.New("the server is shutting down")
	}
	id := ss.ID()
	st := s.byID[id]
	if st == nil || id == "" {
		st = newSession(id)
		if id != "" {
			s.byID[id] = st
		}
	}
	st.ss = ss
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		st.owner = req.Extra.TokenInfo.UserID
	}
	s.sessions[ss] = st
	return st, nil
}

// open creates st's reaper session and starts the goroutines that end it: the watcher of the MCP
// session and, over HTTP, the idle lease. It runs once per session, outside mu.
func (s *Server) open(st *session) error {
	name := "stdio-" + rand.Text()[:12]
	if st.id != "" {
		name = sessionName(st.id)
	}
	rs, err := s.opts.Reaper.NewSession(name, reaper.SessionOptions{OnTaskEnd: func(ti reaper.TaskInfo) { s.taskEnded(st, ti) }})
	if err != nil {
		s.forget(st)
		return err
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		rs.Close(context.Background())
		s.forget(st)
		return errors.New("the server is shutting down")
	}
	st.rs = rs
	s.wg.Add(1)
	go s.watch(st)
	if st.id != "" {
		s.wg.Add(1)
		go s.lease(st)
	}
	if s.opts.KeepAlive > 0 {
		s.wg.Add(1)
		go s.keepalive(st)
	}
	s.mu.Unlock()
	s.log.Info("session started", "session", name, "owner", st.owner)
	return nil
}

// watch ends st when its MCP session ends (stdio EOF, the SDK's own close) and then forgets it.
func (s *Server) watch(st *session) {
	defer s.wg.Done()
	st.ss.Wait()
	s.connectionClosed(st)
	s.forget(st)
}

// connectionClosed ends a session whose connection closed. A stdio client that closed it is on its
// way to killing this process (see StdioCloseGrace), so the grace period is capped.
func (s *Server) connectionClosed(st *session) {
	ctx := context.Background()
	if st.id == "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, StdioCloseGrace)
		defer cancel()
	}
	s.end(ctx, st, endDisconnected)
}

// forget drops st from the index.
func (s *Server) forget(st *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[st.ss] == st {
		delete(s.sessions, st.ss)
	}
	if st.id != "" && s.byID[st.id] == st {
		delete(s.byID, st.id)
	}
}

// end tears a session down: its processes die first (see teardown), then the MCP session is closed
// without holding up the caller: closing waits for tool calls, which return now that their processes
// are gone. The session's watcher sees it close and returns.
func (s *Server) end(ctx context.Context, st *session, reason endReason) error {
	err := s.teardown(ctx, st, reason)
	st.closeOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			st.ss.Close()
		}()
	})
	return err
}

// teardown kills a session's processes, once; later calls wait for the first to finish and return
// its error. ctx is the teardown's: cancelling it cuts the grace period short. It leaves the MCP
// session open: a DELETE hands it to the SDK, which closes it and answers the client (had we closed
// it already, the SDK would answer 404). From its start, tool calls on the session are refused.
func (s *Server) teardown(ctx context.Context, st *session, reason endReason) error {
	st.once.Do(func() {
		defer close(st.ended)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s.mu.Lock()
		st.why = reason.describe(s.opts.IdleTimeout)
		s.hurry[st] = cancel
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.hurry, st)
			s.mu.Unlock()
		}()
		st.cancelStop()
		_, st.err = st.rs.CloseFor(ctx, reason.String()) // which logs the end
		if st.id != "" {
			s.mu.Lock()
			if s.byID[st.id] == st {
				delete(s.byID, st.id) // only now: a DELETE that came meanwhile waited for the teardown
			}
			s.mu.Unlock()
		}
	})
	<-st.ended
	return st.err
}

// Hurry cuts short the grace periods of the teardowns under way: their processes are killed at once.
// Teardowns that begin later keep theirs. A shutdown signal calls it: a stdio session ending because
// its client closed the connection, or a DELETE's teardown, then ends at once.
func (s *Server) Hurry() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cancel := range s.hurry {
		cancel()
	}
}

// taskEnded tells the client that a background task ended, so that it need not poll. It is called
// on the task's watcher, which the session's teardown waits for, so the network call goes to a
// goroutine of its own. The SDK drops the message unless the client has set a logging level.
// Protocol 2026-07-28 deprecates logging notifications, but the clients that speak 2025-11-25 (most,
// today) act on them; when they go, this becomes a task-status notification.
func (s *Server) taskEnded(st *session, ti reaper.TaskInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st.ss.Log(ctx, &mcp.LoggingMessageParams{
			Level:  "info",
			Logger: "reaper",
			Data: map[string]any{
				"event": "task_ended", "task_id": ti.ID, "status": ti.Status, "exit_code": ti.ExitCode,
				"description": ti.Description,
				"message":     fmt.Sprintf("background task %s %s (exit code %d); read its output with task_output", ti.ID, ti.Status, ti.ExitCode),
			},
		})
	}()
}

// Close ends every session (their processes die; cancelling ctx cuts the grace period short) and
// waits for every goroutine the Server started. It is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	all := make([]*session, 0, len(s.sessions))
	for _, st := range s.sessions {
		all = append(all, st)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make([]error, len(all))
	for i, st := range all {
		// A session whose open failed, or is still under way, has no reaper session to end: open
		// sees closing and ends it itself.
		st.open.Do(func() { st.openErr = errors.New("the server is shutting down") })
		if st.rs == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = s.end(ctx, st, endShutdown)
		}()
	}
	wg.Wait()
	// No session can start now (closing is set), so every reaper session was in all.
	for ss := range s.mcp.Sessions() {
		ss.Close()
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// Run serves one connection (stdio) until the client disconnects, then ends its session, within
// StdioCloseGrace. If ctx is done first, Run returns ctx's error at once and leaves the session to
// Close, which the caller calls with the context its teardown should have.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcpserver: connect: %w", err)
	}
	waited := make(chan error, 1)
	s.mu.Lock()
	s.wg.Add(1) // Close waits for it: it returns once Close has closed the MCP session
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		waited <- ss.Wait()
	}()
	select {
	case err := <-waited:
		s.mu.Lock()
		st := s.sessions[ss]
		opened := st != nil && st.rs != nil
		s.mu.Unlock()
		if opened {
			s.connectionClosed(st)
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
