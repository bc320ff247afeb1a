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

// Options configures a Server. Reaper is required; the zero value of every other field is a
// documented default.
type Options struct {
	// Reaper runs the sessions' commands. The Server does not close it.
	Reaper *reaper.Reaper
	// Limits are shown to agents in the tool descriptions; they should match the Reaper's options.
	// Zero fields show the reaper package's defaults.
	Limits Limits
	// IdleTimeout ends an HTTP session that has had no request (and no request in flight on a
	// live connection) for this long, killing its processes. Zero means DefaultIdleTimeout; stdio
	// sessions end with their connection instead.
	IdleTimeout time.Duration
	// KeepAlive, if positive, pings each client this often; a session whose client stops
	// answering ends.
	KeepAlive time.Duration
	// Version is reported to clients as the server's version.
	Version string
	// Logger receives session ends and what they killed. Nil discards.
	Logger *slog.Logger
}

// Limits are the limits the tool descriptions tell agents about. A negative Grace means processes
// are killed without SIGTERM first.
type Limits struct {
	MaxTasks    int
	OutputLimit int
	Grace       time.Duration
	BgTimeout   time.Duration
}

// Server is an MCP server whose sessions run commands through a Reaper. It is safe for concurrent
// use. Close it to end every session.
type Server struct {
	opts Options
	log  *slog.Logger
	mcp  *mcp.Server
	reg  *reaper.Registry
	wg   sync.WaitGroup // session watchers

	// mu guards the fields that follow.
	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session
	byID     map[string]*session // HTTP sessions by Mcp-Session-Id
	activity map[string]*activity
	closing  bool
}

// session is the reaper side of one MCP session.
type session struct {
	ss    *mcp.ServerSession
	id    string // Mcp-Session-Id, or empty over stdio
	rs    *reaper.Session
	owner string // the identity that created the session ("" without authentication)
	lease *time.Timer
	ended chan struct{} // closed when the session's teardown is complete
	once  sync.Once     // runs the teardown
	err   error         // the teardown's error, set before ended is closed
	why   string        // why the session ended; set under Server.mu when the teardown begins

	closeOnce sync.Once // closes the MCP session
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
	s := &Server{
		opts: opts, log: opts.Logger, reg: reaper.NewRegistry(),
		sessions: make(map[*mcp.ServerSession]*session),
		byID:     make(map[string]*session),
		activity: make(map[string]*activity),
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "reaper", Title: "reaper: shell commands that never outlive the session", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions(opts.Limits, opts.IdleTimeout),
		KeepAlive:    opts.KeepAlive,
		Logger:       sdkLogger(opts.Logger),
	})
	s.addTools()
	return s, nil
}

// sdkLogger passes on the SDK's warnings and errors only: its per-connection info lines would
// drown the session log.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(levelHandler{l.Handler(), slog.LevelWarn})
}

type levelHandler struct {
	slog.Handler
	min slog.Level
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return levelHandler{h.Handler.WithAttrs(as), h.min}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.Handler.WithGroup(name), h.min}
}

// session returns the reaper session of the MCP session req came on, creating it on the first tool
// call.
func (s *Server) session(req *mcp.CallToolRequest) (*session, error) {
	ss := req.Session
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.sessions[ss]; ok {
		if st.why != "" {
			// The MCP session is being closed; a call that slipped in must not start a new
			// reaper session in it.
			return nil, fmt.Errorf("this session has ended (%s); connect again for a new one", st.why)
		}
		return st, nil
	}
	if s.closing {
		return nil, errors.New("the server is shutting down")
	}
	st := &session{ss: ss, id: ss.ID(), ended: make(chan struct{})}
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		st.owner = req.Extra.TokenInfo.UserID
	}
	name := st.id
	if name == "" {
		name = "stdio-" + rand.Text()[:12]
	}
	rs, err := s.opts.Reaper.NewSession(name, reaper.SessionOptions{OnTaskEnd: func(ti reaper.TaskInfo) { s.taskEnded(st, ti) }})
	if err != nil {
		return nil, err
	}
	if err := s.reg.Register(rs); err != nil {
		rs.Close(context.Background())
		return nil, err
	}
	st.rs = rs
	s.sessions[ss] = st
	if st.id != "" {
		s.byID[st.id] = st
		st.lease = time.AfterFunc(s.opts.IdleTimeout, func() { s.checkLease(st) })
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ss.Wait()
		s.end(context.Background(), st, "connection closed")
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
	}()
	s.log.Info("session started", "session", name, "owner", st.owner)
	return st, nil
}

// end tears a session down: its processes die first (see teardown), then the MCP session is
// closed without holding up the caller: closing waits for tool calls, which return now that their
// processes are gone. The session's watcher sees it close and returns.
func (s *Server) end(ctx context.Context, st *session, reason string) error {
	err := s.teardown(ctx, st, reason)
	st.closeOnce.Do(func() {
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
// it already, the SDK would answer 404). Until the session's watcher sees the MCP session closed,
// tool calls on it are refused.
func (s *Server) teardown(ctx context.Context, st *session, reason string) error {
	st.once.Do(func() {
		defer close(st.ended)
		s.mu.Lock()
		st.why = reason
		s.mu.Unlock()
		if st.lease != nil {
			st.lease.Stop()
		}
		rep, err := s.reg.CloseAndRemove(ctx, st.rs.ID())
		st.err = err
		s.log.Info("session ended", "session", st.rs.ID(), "reason", reason,
			"killed", rep.Total(), "by_sigterm", rep.Terminated, "hard_killed", rep.Killed,
			"found_by_walk", rep.Found, "remaining", len(rep.Remaining), "took", rep.Duration, "err", err)
		if st.id != "" {
			s.mu.Lock()
			delete(s.byID, st.id) // only now: a DELETE that came meanwhile waited for the teardown
			delete(s.activity, st.id)
			s.mu.Unlock()
		}
	})
	<-st.ended
	return st.err
}

// taskEnded tells the client that a background task ended, so that it need not poll. The SDK drops
// it unless the client has set a logging level. Protocol 2026-07-28 deprecates logging
// notifications, but the clients that speak 2025-11-25 (most, today) act on them; when they go, this
// becomes a task-status notification.
func (s *Server) taskEnded(st *session, ti reaper.TaskInfo) {
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
}

// Close ends every session (their processes die; cancelling ctx cuts the grace period short) and
// waits for the session watchers. It is idempotent.
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
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = s.end(ctx, st, "server shutdown")
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

// Run serves one connection (stdio) until the client disconnects, then ends its session. If ctx is
// done first, every session ends (processes first) and Run returns ctx's error.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcpserver: connect: %w", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- ss.Wait() }()
	select {
	case err := <-waited:
		s.mu.Lock()
		st := s.sessions[ss]
		s.mu.Unlock()
		if st != nil {
			s.end(context.Background(), st, "connection closed")
		}
		return err
	case <-ctx.Done():
		s.Close(context.Background())
		<-waited
		return ctx.Err()
	}
}
