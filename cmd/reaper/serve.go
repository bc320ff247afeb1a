package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/mcpserver"
	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// defaultHTTPAddr is where --http listens when it is given without an address.
const defaultHTTPAddr = "127.0.0.1:8765"

// serveConfig is what the serve command's flags and environment set.
type serveConfig struct {
	http        string
	token       string
	tokenFile   string
	idleTimeout time.Duration
	keepalive   time.Duration
	grace       time.Duration
	bgTimeout   time.Duration
	maxTasks    int
	containment string
	cgroupRoot  string
}

const serveUsage = `Usage: reaper serve [flags]

Serves MCP over stdio (the default) or Streamable HTTP (--http). Each MCP session gets its own
cgroup slice; when the session ends (client close, DELETE, idle timeout, lost keepalive, SIGTERM),
every process it started dies.

Every flag can also be set from the environment as REAPER_<NAME> (for example
REAPER_IDLE_TIMEOUT=5m); a flag on the command line wins.

Flags:
`

// parseServe parses the serve command's arguments and environment.
func parseServe(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, serveUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.http, "http", "", "serve Streamable HTTP at http://`ADDR`/mcp instead of stdio (--http alone: "+defaultHTTPAddr+")")
	fs.StringVar(&c.token, "token", "", "bearer `token` required on every HTTP request")
	fs.StringVar(&c.tokenFile, "token-file", "", "read bearer tokens from `file`: one per line, as \"token\" or \"identity token\"; # starts a comment")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", mcpserver.DefaultIdleTimeout, "end an HTTP session with no request for this `duration`, killing its processes")
	fs.DurationVar(&c.keepalive, "keepalive", 0, "ping clients this often and end sessions whose client stops answering (0: off)")
	fs.DurationVar(&c.grace, "grace", reaper.DefaultGrace, "time between SIGTERM and SIGKILL when a session or task ends")
	fs.DurationVar(&c.bgTimeout, "bg-timeout", 0, "kill background tasks that run longer than this (0: no limit)")
	fs.IntVar(&c.maxTasks, "max-tasks", reaper.DefaultMaxTasks, "most background tasks running at once per session")
	fs.StringVar(&c.containment, "containment", "auto", "auto, cgroup (require cgroup v2) or process (process groups and /proc walk only)")
	fs.StringVar(&c.cgroupRoot, "cgroup-root", "", "absolute `path` of the cgroup under which sessions' slices are created (default: a child \"reaper\" of reaper's own cgroup)")

	if err := fs.Parse(normalizeHTTPFlag(args)); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "REAPER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" && !set[f.Name] && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %v", name, v, err)
			}
		}
	})
	if envErr != nil {
		return c, envErr
	}
	if c.http == "true" { // REAPER_HTTP=true, or the flag's bare form after normalising
		c.http = defaultHTTPAddr
	}
	switch {
	case c.idleTimeout <= 0:
		return c, errors.New("--idle-timeout must be positive")
	case c.keepalive < 0, c.grace < 0, c.bgTimeout < 0:
		return c, errors.New("--keepalive, --grace and --bg-timeout must not be negative")
	case c.maxTasks < 1:
		return c, errors.New("--max-tasks must be at least 1")
	}
	if _, err := reaper.ParseContainment(c.containment); err != nil {
		return c, err
	}
	return c, nil
}

// normalizeHTTPFlag lets --http take its address as the next argument or stand alone: "--http ADDR"
// becomes "--http=ADDR", and a bare "--http" (last, or followed by another flag) the default address.
func normalizeHTTPFlag(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a == "--http" || a == "-http" {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				out = append(out, "--http="+args[i+1])
				i++
			} else {
				out = append(out, "--http="+defaultHTTPAddr)
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

// tokens collects the bearer tokens from --token and --token-file, keyed to their identities.
func (c serveConfig) tokens() (map[string]string, error) {
	out := map[string]string{}
	if c.token != "" {
		out[c.token] = "token"
	}
	if c.tokenFile == "" {
		return out, nil
	}
	f, err := os.Open(c.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		switch len(fields) {
		case 0:
			continue
		case 1:
			out[fields[0]] = "token-" + strconv.Itoa(n)
		case 2:
			out[fields[1]] = fields[0]
		default:
			return nil, fmt.Errorf("token file %s line %d: want \"token\" or \"identity token\"", c.tokenFile, n)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", c.tokenFile, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("token file %s holds no token", c.tokenFile)
	}
	return out, nil
}

// isLoopback reports whether every address host:port can mean is a loopback address.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "" {
		return false, nil // all interfaces
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false, err
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// serve runs the serve command and returns the process's exit status.
func serve(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, err := parseServe(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "reaper serve: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	tokens, err := c.tokens()
	if err != nil {
		fmt.Fprintf(stderr, "reaper serve: %v\n", err)
		return 2
	}
	var ln net.Listener
	if c.http != "" {
		loop, err := isLoopback(c.http)
		if err != nil {
			fmt.Fprintf(stderr, "reaper serve: --http %s: %v\n", c.http, err)
			return 2
		}
		if !loop && len(tokens) == 0 {
			fmt.Fprintf(stderr, "reaper serve: refusing to serve on %s without a token: anyone who can reach it could run commands as this user. "+
				"Set --token, REAPER_TOKEN or --token-file, or listen on a loopback address such as %s.\n", c.http, defaultHTTPAddr)
			return 2
		}
		if ln, err = net.Listen("tcp", c.http); err != nil {
			fmt.Fprintf(stderr, "reaper serve: %v\n", err)
			return 1
		}
	}

	containment, _ := reaper.ParseContainment(c.containment)
	r, err := reaper.New(reaper.Options{
		Containment:       containment,
		Cgroup:            cgroup.Options{Root: c.cgroupRoot},
		Grace:             graceOption(c.grace),
		BackgroundTimeout: c.bgTimeout,
		MaxTasks:          c.maxTasks,
		Logger:            log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "reaper serve: %v\n", err)
		return 1
	}
	srv, err := mcpserver.New(mcpserver.Options{
		Reaper:      r,
		Limits:      mcpserver.Limits{MaxTasks: c.maxTasks, Grace: graceOption(c.grace), BgTimeout: c.bgTimeout},
		IdleTimeout: c.idleTimeout,
		KeepAlive:   c.keepalive,
		Version:     versionString(),
		Logger:      log,
	})
	if err != nil {
		r.Close(context.Background())
		fmt.Fprintf(stderr, "reaper serve: %v\n", err)
		return 1
	}

	// The first signal shuts down gracefully (SIGTERM, grace, kill); a second one cuts the grace
	// periods short.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	serveCtx, stopServing := context.WithCancel(context.Background())
	teardownCtx, hurry := context.WithCancel(context.Background())
	watched := make(chan struct{})
	defer func() {
		stopServing()
		hurry()
		<-watched
	}()
	go func() {
		defer close(watched)
		select {
		case sig := <-sigs:
			log.Info("shutting down: every session's processes are being killed", "signal", sig.String())
			stopServing()
		case <-serveCtx.Done():
			return
		}
		select {
		case sig := <-sigs:
			log.Warn("second signal: killing without waiting for the grace period", "signal", sig.String())
			hurry()
		case <-teardownCtx.Done():
		}
	}()

	status := 0
	if ln == nil {
		log.Info("reaper serving MCP over stdio", "containment", r.Containment().String(), "version", versionString())
		err := srv.Run(serveCtx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			log.Error("stdio session ended with an error", "err", err)
		}
	} else {
		auth := "no authentication (loopback only)"
		if len(tokens) > 0 {
			auth = fmt.Sprintf("bearer token required (%d identities)", len(identities(tokens)))
		}
		log.Info("reaper serving MCP over Streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp",
			"auth", auth, "idle_timeout", c.idleTimeout, "containment", r.Containment().String(), "version", versionString())
		mux := http.NewServeMux()
		mux.Handle("/mcp", srv.HTTPHandler(mcpserver.HTTPOptions{Tokens: tokens}))
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		served := make(chan error, 1)
		go func() { served <- hs.Serve(ln) }()
		select {
		case err := <-served:
			log.Error("HTTP server failed", "err", err)
			status = 1
		case <-serveCtx.Done():
		}
		// Sessions end first (their processes die and their tool calls return), then the
		// listener and the connections.
		srv.Close(teardownCtx)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		hs.Shutdown(ctx)
		cancel()
		hs.Close()
	}
	stopServing()
	if err := srv.Close(teardownCtx); err != nil {
		log.Error("closing sessions", "err", err)
	}
	if err := r.Close(teardownCtx); err != nil {
		log.Error("closing the reaper", "err", err)
		status = 1
	}
	log.Info("reaper stopped")
	return status
}

// graceOption maps the --grace flag to reaper.Options.Grace, where zero means the default and a
// negative value none.
func graceOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func identities(tokens map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, id := range tokens {
		out[id] = true
	}
	return out
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
