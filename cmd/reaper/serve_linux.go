package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/internal/httpguard"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/mcpserver"
	"github.com/cgreaper/reaper/reaper"
)

// serve runs the serve command and returns the process's exit status. Started by a user, it is the
// guard (see runGuard) once its command line is checked; started by the guard, it is the server.
func serve(args []string, e env) int {
	if !guard.Guarded(e.getenv) {
		_, err := parseServe(args, e.getenv)
		if code := parsed("serve", serveUsage, err, e.stdout, e.stderr, badUsage); code >= 0 {
			return code
		}
		return runGuard("serve", 0, args, e)
	}
	log := earlyLogger(e.stderr, args, e.getenv)
	link, err := guard.LinkFrom(e.getenv)
	sig := watchSignals(log, link)
	defer sig.stop()
	if err != nil {
		fmt.Fprintf(e.stderr, "reaper serve: %v\n", err)
		return 1
	}
	c, err := parseServe(args, e.getenv)
	if code := parsed("serve", serveUsage, err, e.stdout, e.stderr, badUsage); code >= 0 {
		return code
	}
	a, err := c.auth()
	if err != nil {
		fmt.Fprintf(e.stderr, "reaper serve: %v\n", err)
		return 2
	}
	for _, w := range tokenWarnings(c) {
		log.Warn(w)
	}
	ln, status := listen(c, a, e.stderr)
	if status != 0 {
		return status
	}
	if ln != nil {
		defer ln.Close() // for a start that fails; serveHTTP closes it otherwise
	}
	o, status := startOps(c, log, e.stderr)
	defer o.close()
	if status != 0 {
		return status
	}
	r, srv, err := newServer(c, &a, link, log, o)
	if err != nil {
		fmt.Fprintf(e.stderr, "reaper serve: %v\n", err)
		return 1
	}
	sig.onSignal(srv.Hurry)
	<-sig.asked                  // every shutdown signal is handled before the first request is
	defer sig.watchdog(r, log)() // before sig.stop, which cancels hurry, which arms the watchdog
	stopMemory, memoryDone := make(chan struct{}), make(chan struct{})
	go returnMemory(stopMemory, memoryDone)
	defer func() { close(stopMemory); <-memoryDone }()
	if ln == nil {
		// The start-up line and /readyz wait for the probe of PID namespaces (Containment does); the
		// client's first requests do not.
		started := make(chan struct{})
		go func() {
			defer close(started)
			o.ready(r, "")
			log.Info("reaper serving MCP over stdio", startAttrs(c, r, o)...)
		}()
		notify(log, "READY=1")
		err := srv.Run(sig.serving, srv.StdioTransport(e.stdin, e.stdout))
		<-started
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			log.Error("stdio session ended with an error", "error", err)
		}
	} else {
		warning := ""
		if a.insecure {
			warning = "WARNING: no authentication (--insecure-no-auth): every local user and every task can run commands"
		}
		o.ready(r, warning)
		notify(log, "READY=1")
		level := slog.LevelInfo
		if c.insecureNoAuth {
			level = slog.LevelWarn // said first, where an operator looks
		}
		log.Log(context.Background(), level, "reaper serving MCP over Streamable HTTP", append([]any{"url", endpointURL(c.http, ln.Addr()),
			"auth", a.text(), "idle_timeout", c.idleTimeout.String()}, startAttrs(c, r, o)...)...)
		status = serveHTTP(sig, srv, ln, a, c, o, log)
	}
	o.stopping()
	status, clean := shutdown(sig, srv, r, log, status)
	o.close()
	if clean {
		if err := link.Clean(); err != nil {
			log.Warn("the guard will clean up after all", "error", err)
		}
	}
	return e.exit.now(status) // what the deferred calls stop dies with the process
}

// listen checks the HTTP address, refuses one that is not loopback without authentication
// (--insecure-no-auth), and opens the listener. It returns a nil listener for stdio, and a non-zero
// status on failure.
func listen(c serveConfig, a httpAuth, stderr io.Writer) (net.Listener, int) {
	if c.http == "" {
		return nil, 0
	}
	_, port, err := net.SplitHostPort(c.http)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	var loop bool
	if err == nil {
		loop, err = isLoopback(c.http)
	}
	if err != nil {
		fmt.Fprintf(stderr, "reaper serve: --http %s: %v; give HOST:PORT, such as %s\n", c.http, err, defaultHTTPAddr)
		return nil, 2
	}
	if !loop && a.insecure {
		fmt.Fprintf(stderr, "reaper serve: refusing --insecure-no-auth on %s: anyone who can reach it could run commands as the tasks' user. "+
			"Leave --insecure-no-auth out (reaper then requires its own token, or the one you give), or listen on a loopback address such as %s.\n", c.http, defaultHTTPAddr)
		return nil, 2
	}
	ln, err := net.Listen("tcp", c.http)
	if err != nil {
		fmt.Fprintf(stderr, "reaper serve: %v\n", err)
		return nil, 1
	}
	return ln, 0
}

// newServer creates the Reaper and the MCP server on top of it, then reads (or makes) reaper's own
// token if a is to use it: once the Reaper has made and checked its state directory, so that a
// start that fails leaves nothing new behind.
func newServer(c serveConfig, a *httpAuth, link guard.Link, log *slog.Logger, o *ops) (*reaper.Reaper, *mcpserver.Server, error) {
	opts := c.options(link, log)
	if c.user != "" {
		var err error
		if opts.User, err = lookupUser(c.user); err != nil {
			return nil, nil, err
		}
	}
	opts.BackgroundTimeout, opts.MaxTasks = c.bgTimeout, c.maxTasks
	opts.OutputBudget, opts.TotalOutputBudget = int64(c.outBudget), int64(c.outTotal)
	opts.SessionLimits = cgroup.Limits{MemoryMax: int64(c.memoryMax), PidsMax: c.pidsMax, CPUs: float64(c.cpuMax)}
	opts.Observer = o.reaperObserver()
	r, err := reaper.New(opts)
	if err != nil {
		return nil, nil, err
	}
	srv, err := mcpserver.New(mcpserver.Options{
		Reaper:                 r,
		IdleTimeout:            c.idleTimeout,
		KeepAlive:              c.keepalive,
		MaxWorkspaces:          c.maxWS,
		MaxOutput:              c.maxOutput,
		MaxCallBytes:           int(c.maxCallSize),
		MaxSessions:            c.maxSessions,
		MaxSessionsPerIdentity: a.perIdentity(c.maxSessionsPerID, c.maxSessions),
		Version:                versionString(),
		Logger:                 log,
		Observer:               o.mcpObserver(),
	})
	if err == nil && a.own {
		if err = a.ownToken(c.stateDir); err != nil {
			srv.Close(context.Background())
		}
	}
	if err != nil {
		r.Close(context.Background())
		return nil, nil, err
	}
	return r, srv, nil
}

// serveHTTP serves until the first shutdown signal or a listener failure, then ends every session
// (their processes die and their tool calls return) before it closes the listener and the
// connections. It returns the exit status so far.
func serveHTTP(sig *signals, srv *mcpserver.Server, ln net.Listener, a httpAuth, c serveConfig, o *ops, log *slog.Logger) int {
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(mcpserver.HTTPOptions{Tokens: a.tokens, Unauthenticated: c.insecureNoAuth}))
	// Headers, bodies and idle connections are bounded before any check sees a request, and
	// connections are counted in all, per peer before they authenticate and per identity after, so
	// that nobody can take every descriptor.
	hs := httpguard.NewServer(mux, httpguard.Options{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
	ln = httpguard.Limit(ln, httpguard.ConnLimits{
		Total: c.maxConns, PerPeer: c.maxConnsPerPeer, // Unauthenticated: a quarter of Total
		PerIdentity: a.perIdentity(c.maxConnsPerID, c.maxConns),
		Refused:     o.connectionRefused,
	})
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	status := 0
	select {
	case err := <-served:
		log.Error("HTTP server failed", "error", err)
		status = 1
		served <- err // for the wait below
	case <-sig.serving.Done():
	}
	// A second signal closes every connection at once: a session's end waits for its tool calls'
	// answers to be written, which a client that does not read them holds for a write's bound
	// (httpguard.Options.WriteStall).
	defer context.AfterFunc(sig.hurry, func() { hs.Close() })()
	srv.Close(sig.hurry)
	// Connections still busy get 5 s to finish, none after a second signal.
	ctx, cancel := context.WithTimeout(sig.hurry, 5*time.Second)
	hs.Shutdown(ctx)
	cancel()
	hs.Close()
	<-served
	return status
}

// shutdown ends every session and the Reaper, and returns the exit status and whether the Reaper
// closed cleanly: every session ended, and nothing its instance made is left.
func shutdown(sig *signals, srv *mcpserver.Server, r *reaper.Reaper, log *slog.Logger, status int) (_ int, clean bool) {
	notify(log, "STOPPING=1") // also when reaper stops by itself (stdio EOF, a listener failure)
	sig.stopServing()
	if err := srv.Close(sig.hurry); err != nil {
		log.Error("closing sessions", "error", err)
	}
	err := r.Close(sig.hurry)
	if err != nil {
		log.Error("closing the reaper", "error", err)
		status = 1
	}
	log.Info("reaper stopped")
	return status, err == nil
}

// startAttrs are what the start-up line says of containment, limits, the admin endpoint, where the
// instance keeps its state (the command that lists its sessions and processes), whose user tasks run
// as, and reaper's version.
func startAttrs(c serveConfig, r *reaper.Reaper, o *ops) []any {
	ci := r.Containment()
	self := r.Instance()
	attrs := []any{"containment", ci.String(), "pid_namespace", ci.PIDNamespace.String(),
		"state_dir", filepath.Dir(self.StateDir), "ps", psCommand(self)}
	if l := limitsText(ci.Limits); l != "" {
		attrs = append(attrs, "limits", l)
	}
	if o.url != "" {
		attrs = append(attrs, "admin", o.url)
	}
	runAs := c.user
	if runAs == "" {
		runAs = fmt.Sprintf("reaper's own user (uid %d; --user runs them as another)", os.Geteuid())
	}
	return append(attrs, "tasks_run_as", runAs, "version", versionString())
}

// psCommand is the `reaper ps` command line that looks where the instance self keeps its state and
// its sessions' slices.
func psCommand(self reaper.Instance) string {
	cmd := "reaper ps --state-dir " + shellWord(filepath.Dir(self.StateDir))
	if self.Slice == "" {
		return cmd + " --containment process"
	}
	return cmd + " --cgroup-root " + shellWord(filepath.Dir(self.Slice))
}

// shellWord returns s as one word of a shell command line: as it is when it holds nothing the shell
// treats specially, else in single quotes.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@%,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// httpAuth is how HTTP clients authenticate: the tokens, and where reaper's own is kept (when it is
// the one).
type httpAuth struct {
	tokens    map[string]string
	own       bool   // no token was configured: reaper's own is the one (see ownToken)
	tokenPath string // reaper's own token's file, once read
	insecure  bool   // --insecure-no-auth
}

// auth returns how HTTP clients authenticate: the tokens configured; else, unless
// --insecure-no-auth, reaper's own token (see ownToken). Over stdio there is none.
func (c serveConfig) auth() (httpAuth, error) {
	if c.http == "" {
		return httpAuth{}, nil
	}
	if c.insecureNoAuth {
		return httpAuth{insecure: true}, nil
	}
	tokens, err := c.tokens()
	return httpAuth{tokens: tokens, own: err == nil && len(tokens) == 0}, err
}

// ownToken reads reaper's own token from the state directory, making it if it is missing (see
// instance.StateToken).
func (a *httpAuth) ownToken(stateDir string) error {
	tok, path, err := instance.StateToken(stateDir)
	if err != nil {
		return fmt.Errorf("%w; or give a token (--token-file, REAPER_TOKEN)", err)
	}
	a.tokens, a.tokenPath = map[string]string{tok: "token"}, path
	return nil
}

// text is what the start-up line says of authentication: never a token.
func (a httpAuth) text() string {
	switch {
	case a.insecure:
		return "NONE (--insecure-no-auth): every local user and every task can run commands here"
	case a.tokenPath != "":
		return "bearer token required: reaper's own, in " + a.tokenPath + " (readable by reaper's user only); clients send \"Authorization: Bearer <its content>\""
	}
	return fmt.Sprintf("bearer token required (%d identities)", identities(a.tokens))
}

// identities counts the identities tokens stand for.
func identities(tokens map[string]string) int {
	return len(slices.Compact(slices.Sorted(maps.Values(tokens))))
}

// perIdentity is the share of a cap of all that one identity may hold: flag if set, else every one
// where a has at most one identity (stdio's one client, reaper's own token, or tokens of one name), a
// quarter of them (at least one) where there are more (with --insecure-no-auth, each peer is one).
func (a httpAuth) perIdentity(flag, all int) int {
	if flag > 0 {
		return flag
	}
	if identities(a.tokens) <= 1 && !a.insecure {
		return all
	}
	return max(all/4, 1)
}

// lookupUser resolves --user USER[:GROUP]: a name or a numeric id, and optionally a group by name or
// id, which becomes the primary group instead of the user's. The supplementary groups are the user's
// (from the group database). A numeric user without an account runs with HOME=/ and no supplementary
// groups. os/user reads /etc/passwd and /etc/group itself in a static build, so accounts from NSS
// modules (LDAP, sssd) are not found by name there: give their ids.
func lookupUser(spec string) (*reaper.User, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	if name == "" || hasGroup && group == "" {
		return nil, fmt.Errorf("--user %q: want USER or USER:GROUP", spec)
	}
	u, err := user.Lookup(name)
	if err != nil {
		if id, perr := strconv.ParseUint(name, 10, 32); perr == nil {
			if u, err = user.LookupId(name); err != nil {
				// An id without an account.
				u = &user.User{Uid: name, Gid: name, Username: strconv.FormatUint(id, 10), HomeDir: "/"}
			}
		}
	}
	if err != nil && u == nil {
		return nil, fmt.Errorf("--user %q: %w", spec, err)
	}
	out := &reaper.User{Name: u.Username, Home: u.HomeDir}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("--user %q: uid %q or gid %q is not a number", spec, u.Uid, u.Gid)
	}
	out.Uid, out.Gid = uint32(uid), uint32(gid)
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				out.Groups = append(out.Groups, uint32(n))
			}
		}
	}
	if hasGroup {
		g, err := user.LookupGroup(group)
		if err != nil {
			if _, perr := strconv.ParseUint(group, 10, 32); perr != nil {
				return nil, fmt.Errorf("--user %q: %w", spec, err)
			}
			g = &user.Group{Gid: group}
		}
		n, _ := strconv.ParseUint(g.Gid, 10, 32)
		out.Gid = uint32(n)
	}
	if out.Home == "" {
		out.Home = "/"
	}
	return out, nil
}

// tokenWarnings says what exposes the bearer tokens to other local processes, tasks included: a
// token on the command line (in /proc/<pid>/cmdline of the guard and the server), and a token file
// that others may read.
func tokenWarnings(c serveConfig) []string {
	var warn []string
	if c.tokenOnCommandLine {
		warn = append(warn, "--token on the command line can be read by every local process, tasks included, in /proc/<pid>/cmdline of reaper and of its guard: set REAPER_TOKEN in reaper's environment or use --token-file with a file only reaper can read")
	}
	for _, file := range []string{c.tokenFile, c.adminTokenFile} {
		if file == "" {
			continue
		}
		if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
			warn = append(warn, fmt.Sprintf("the token file %s can be read by other users (mode %04o): make it readable by reaper only (chmod 600)", file, fi.Mode().Perm()))
		}
	}
	return warn
}
