package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultIdleTimeout ends an HTTP session that has had no request for this long.
const DefaultIdleTimeout = 10 * time.Minute

// DefaultMaxSessions bounds the sessions and workspaces a server holds at once unless
// Options.MaxSessions says otherwise. reaper serve sizes its own default for the machine.
const DefaultMaxSessions = 128

// Options configures a Server. Reaper is required; the zero value of every other field is a
// documented default.
type Options struct {
	// Reaper runs the sessions' commands; its Limits are what the tool descriptions tell agents. The
	// Server does not close it.
	Reaper *reaper.Reaper
	// IdleTimeout ends an HTTP session that has had no request (and no request in flight on a
	// live connection) for this long, killing its processes; it is also a workspace's lease, which
	// every call that names the workspace renews. Zero means DefaultIdleTimeout; stdio sessions end
	// with their connection instead.
	IdleTimeout time.Duration
	// KeepAlive pings the client of each session that ran a tool this often; a session whose client
	// leaves KeepAliveMisses pings in a row unanswered ends (see keepalive). Zero means off (the
	// default).
	// Workspaces (protocol 2026-07-28) have no connection to ping: their lease ends them.
	KeepAlive time.Duration
	// MaxOutput is how many characters of output a tool result holds unless the call asks for another
	// number (max_output). Zero means DefaultMaxOutput; more than MaxOutput counts as MaxOutput.
	MaxOutput int
	// MaxWorkspaces bounds the workspaces (protocol 2026-07-28 over HTTP) one identity holds open
	// at once; workspace_open refuses beyond it. Zero means DefaultMaxWorkspaces.
	MaxWorkspaces int
	// MaxSessions bounds the sessions and workspaces the server holds at once, from a session's
	// initialize (or workspace_open) to its end; a new one beyond it is refused with an error that
	// says so. Zero means DefaultMaxSessions. A stdio server has one session.
	MaxSessions int
	// MaxSessionsPerIdentity bounds the sessions and workspaces one identity holds at once, so that
	// one client cannot take them all. Zero means MaxSessions.
	MaxSessionsPerIdentity int
	// MaxCallBytes bounds a tools/call message, over either transport; every other method's is
	// 64 KiB, and every message's depth and count of values are bounded too (see limits.go). Zero
	// means DefaultMaxCallBytes.
	MaxCallBytes int
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
// Lock order: the package has one lock, Server.mu, a leaf: no reaper, SDK or network call, file-system
// work or channel wait happens while it is held. Methods that need it held end in Locked. Callers may
// hold a lock of theirs when they call Hurry (cmd/reaper's signals.mu).
type Server struct {
	// The fields up to mu are fixed at creation.
	opts Options
	log  *slog.Logger
	// clientLog is log, rate-limited, for the lines a client can make at will (see limitedLogger).
	clientLog *slog.Logger
	// sdkLog is the SDK's: its warnings and errors only, in clientLog's budget (a client can make the
	// SDK log an error per message).
	sdkLog *slog.Logger
	mcp    *mcp.Server // the session era: stdio at any version, HTTP up to 2025-11-25
	ws     *mcp.Server // the workspace era: HTTP from 2026-07-28 on, stateless
	// maxOutput is the characters of output a tool result holds by default (see outputBudget).
	maxOutput int
	// limits bound every message before the SDK decodes it (see limits.go).
	limits messageLimits
	// wg counts the goroutines the Server starts (see goLocked).
	wg sync.WaitGroup

	// mu guards the fields that follow, and the fields of every session marked so.
	mu sync.Mutex
	// sessions is the index: every session from its first request until its watcher drops it.
	sessions map[key]*session
	// closing is set by Close: no session, and no goroutine, starts from then on.
	closing bool
	// reserved holds, by identity, the sessions being made: an initialize on its way through the
	// SDK, until the session's record is made as the SDK handles it (see reserve).
	reserved map[string][]*ticket
}

// New returns a server with the bash, task_output, task_stop, task_list and write_stdin tools, and over HTTP from
// protocol 2026-07-28 on, workspace_open, workspace_close and workspace_list.
func New(opts Options) (*Server, error) {
	if opts.Reaper == nil {
		return nil, errors.New("mcpserver: Options.Reaper is required")
	}
	if opts.IdleTimeout < 0 || opts.KeepAlive < 0 || opts.MaxWorkspaces < 0 || opts.MaxSessions < 0 || opts.MaxSessionsPerIdentity < 0 || opts.MaxCallBytes < 0 {
		return nil, errors.New("mcpserver: Options.IdleTimeout, KeepAlive, MaxWorkspaces, MaxSessions, MaxSessionsPerIdentity and MaxCallBytes must not be negative")
	}
	opts.IdleTimeout = cmp.Or(opts.IdleTimeout, DefaultIdleTimeout)
	opts.MaxWorkspaces = cmp.Or(opts.MaxWorkspaces, DefaultMaxWorkspaces)
	opts.MaxSessions = cmp.Or(opts.MaxSessions, DefaultMaxSessions)
	opts.MaxSessionsPerIdentity = cmp.Or(opts.MaxSessionsPerIdentity, opts.MaxSessions)
	opts.MaxCallBytes = cmp.Or(opts.MaxCallBytes, DefaultMaxCallBytes)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	s := &Server{opts: opts, log: opts.Logger, sessions: make(map[key]*session), reserved: make(map[string][]*ticket),
		limits: messageLimits{callBytes: opts.MaxCallBytes}}
	budget := &logLimit{}
	s.clientLog = limitedLogger(opts.Logger, slog.LevelDebug, budget)
	s.sdkLog = limitedLogger(opts.Logger, slog.LevelWarn, budget)
	lim := opts.Reaper.Limits()
	s.maxOutput = min(opts.MaxOutput, MaxOutput)
	if s.maxOutput <= 0 {
		s.maxOutput = DefaultMaxOutput
	}
	s.mcp = mcp.NewServer(s.implementation(), &mcp.ServerOptions{
		Instructions: instructions(lim, s.maxOutput, opts.IdleTimeout),
		Logger:       s.sdkLog, // no KeepAlive: the Server's own (see keepalive)
	})
	s.addTools(lim)
	// The receiving middleware, outermost first, in one call (the order matters): EncodeOnce, so that
	// everything inside sees the tools' own *mcp.CallToolResult; observe, which times the layers
	// inside and reads IsError; trackSessions, which makes a session's record at its first request,
	// whatever its method; dropNullArguments, before the tools' handlers validate the arguments.
	s.mcp.AddReceivingMiddleware(sdkfix.EncodeOnce, s.observe, s.trackSessions, dropNullArguments)
	s.ws = mcp.NewServer(s.implementation(), &mcp.ServerOptions{
		Instructions: workspaceInstructions(lim, s.maxOutput, opts.IdleTimeout, opts.MaxWorkspaces),
		Logger:       s.sdkLog,
	})
	s.addWorkspaceTools(lim)
	// The same, but for trackSessions: a stateless request's session is its own, which nothing tracks.
	s.ws.AddReceivingMiddleware(sdkfix.EncodeOnce, s.observe, dropNullArguments)
	return s, nil
}

func (s *Server) implementation() *mcp.Implementation {
	return &mcp.Implementation{Name: "reaper", Title: "reaper: shell commands that never outlive the session", Version: s.opts.Version}
}

// goLocked runs f in a goroutine that Close waits for, unless the Server is closing, and reports
// whether it did. s.mu must be held: so every wg.Add happens while closing is false, before Close
// waits.
func (s *Server) goLocked(f func()) bool {
	if s.closing {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// Hurry cuts short the grace periods of the teardowns under way (a shutdown signal calls it): their
// processes are killed at once. Teardowns that begin later keep theirs.
func (s *Server) Hurry() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.sessions {
		if st.hurry != nil {
			st.hurry()
		}
	}
}

// taskEnded tells the client that a background task ended, so that it need not poll, as a logging
// notification (which the SDK drops unless the client set a level; 2025-11-25 clients act on it). It
// is called on the task's watcher, which the teardown waits for, so the network call goes to a
// goroutine of its own. A workspace has no connection to send it on.
func (s *Server) taskEnded(st *session, ti reaper.TaskInfo) {
	if st.ss == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.goLocked(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		//lint:ignore SA1019 the one use of MCP logging: the task-end notification of 2025-11-25 clients (see above)
		st.ss.Log(ctx, &mcp.LoggingMessageParams{
			Level:  "info",
			Logger: "reaper",
			Data: map[string]any{
				"event": "task_ended", "task_id": ti.ID, "status": ti.Status, "exit_code": ti.ExitCode,
				"description": ti.Description,
				"message":     fmt.Sprintf("background task %s %s (exit code %d); read its output with task_output", ti.ID, ti.Status, ti.ExitCode),
			},
		})
	})
}

// Close ends every session (their processes die; cancelling ctx cuts the grace period short) and
// waits for every goroutine the Server started. It is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true // no session starts now, so every one is in all
	all := make([]*session, 0, len(s.sessions))
	for _, st := range s.sessions {
		all = append(all, st)
	}
	s.mu.Unlock()
	// Eight teardowns at a time; once ctx is done (a second signal) the rest begin at once, hurried.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make([]error, len(all))
	for i, st := range all {
		held := false
		select {
		case sem <- struct{}{}:
			held = true
		case <-ctx.Done():
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if held {
				defer func() { <-sem }()
			}
			errs[i] = s.end(ctx, st, endShutdown)
		}()
	}
	wg.Wait()
	// A stdio client has StdioCloseGrace to take its last answers; then writing stops, so that one
	// that stopped reading cannot hold the SDK's close of its session below, nor reaper's exit.
	var timers []func() bool
	s.mu.Lock()
	for _, st := range all {
		if st.input != nil {
			timers = append(timers, st.input.GiveUpAfter(StdioCloseGrace))
		}
	}
	s.mu.Unlock()
	for _, srv := range []*mcp.Server{s.mcp, s.ws} {
		for ss := range srv.Sessions() {
			ss.Close()
		}
	}
	s.wg.Wait()
	for _, stop := range timers {
		stop() // every session is closed: nothing is left to give up on
	}
	return errors.Join(errs...)
}
