package main

import (
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
	"syscall"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/mcpserver"
	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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
	ln, status := listen(c, tokens, stderr)
	if status != 0 {
		return status
	}
	r, srv, err := newServer(c, log)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		fmt.Fprintf(stderr, "reaper serve: %v\n", err)
		return 1
	}
	sig := watchSignals(log)
	defer sig.stop()
	notify(log, "READY=1")
	if ln == nil {
		log.Info("reaper serving MCP over stdio", "containment", r.Containment().String(), "version", versionString())
		err := srv.Run(sig.serving, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			log.Error("stdio session ended with an error", "error", err)
		}
	} else {
		log.Info("reaper serving MCP over Streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp",
			"auth", authText(tokens), "idle_timeout", c.idleTimeout, "containment", r.Containment().String(), "version", versionString())
		status = serveHTTP(sig, srv, ln, tokens, log)
	}
	return shutdown(sig, srv, r, log, status)
}

// listen refuses an HTTP address that is not loopback unless there is a token, and opens the
// listener. It returns a nil listener for stdio, and a non-zero status on failure.
func listen(c serveConfig, tokens map[string]string, stderr io.Writer) (net.Listener, int) {
	if c.http == "" {
		return nil, 0
	}
	loop, err := isLoopback(c.http)
	if err != nil {
		fmt.Fprintf(stderr, "reaper serve: --http %s: %v\n", c.http, err)
		return nil, 2
	}
	if !loop && len(tokens) == 0 {
		fmt.Fprintf(stderr, "reaper serve: refusing to serve on %s without a token: anyone who can reach it could run commands as this user. "+
			"Set --token, REAPER_TOKEN or --token-file, or listen on a loopback address such as %s.\n", c.http, defaultHTTPAddr)
		return nil, 2
	}
	ln, err := net.Listen("tcp", c.http)
	if err != nil {
		fmt.Fprintf(stderr, "reaper serve: %v\n", err)
		return nil, 1
	}
	return ln, 0
}

// newServer creates the Reaper and the MCP server on top of it.
func newServer(c serveConfig, log *slog.Logger) (*reaper.Reaper, *mcpserver.Server, error) {
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
		return nil, nil, err
	}
	srv, err := mcpserver.New(mcpserver.Options{
		Reaper:      r,
		IdleTimeout: c.idleTimeout,
		KeepAlive:   c.keepalive,
		Version:     versionString(),
		Logger:      log,
	})
	if err != nil {
		r.Close(context.Background())
		return nil, nil, err
	}
	return r, srv, nil
}

// signals turns shutdown signals into two contexts: the first signal cancels serving (sessions are
// torn down gracefully: SIGTERM, grace, kill); a second one cancels hurry, which cuts the grace
// periods short.
type signals struct {
	serving     context.Context
	stopServing context.CancelFunc
	hurry       context.Context
	cancelHurry context.CancelFunc
	ch          chan os.Signal
	done        chan struct{} // closed when the watching goroutine has returned
}

func watchSignals(log *slog.Logger) *signals {
	s := &signals{ch: make(chan os.Signal, 2), done: make(chan struct{})}
	s.serving, s.stopServing = context.WithCancel(context.Background())
	s.hurry, s.cancelHurry = context.WithCancel(context.Background())
	signal.Notify(s.ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		defer close(s.done)
		select {
		case sig := <-s.ch:
			log.Info("shutting down: every session's processes are being killed", "signal", sig.String())
			notify(log, "STOPPING=1")
			s.stopServing()
		case <-s.serving.Done():
		}
		select {
		case sig := <-s.ch:
			log.Warn("second signal: killing without waiting for the grace period", "signal", sig.String())
			s.cancelHurry()
		case <-s.hurry.Done():
		}
	}()
	return s
}

// stop ends the watch and waits for its goroutine.
func (s *signals) stop() {
	signal.Stop(s.ch)
	s.stopServing()
	s.cancelHurry()
	<-s.done
}

// serveHTTP serves until the first shutdown signal or a listener failure, then ends every session
// (their processes die and their tool calls return) before it closes the listener and the
// connections. It returns the exit status so far.
func serveHTTP(sig *signals, srv *mcpserver.Server, ln net.Listener, tokens map[string]string, log *slog.Logger) int {
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(mcpserver.HTTPOptions{Tokens: tokens}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
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
	srv.Close(sig.hurry)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	hs.Shutdown(ctx)
	cancel()
	hs.Close()
	<-served
	return status
}

// shutdown ends every session and the Reaper, and returns the exit status.
func shutdown(sig *signals, srv *mcpserver.Server, r *reaper.Reaper, log *slog.Logger, status int) int {
	notify(log, "STOPPING=1") // also when reaper stops by itself (stdio EOF, a listener failure)
	sig.stopServing()
	if err := srv.Close(sig.hurry); err != nil {
		log.Error("closing sessions", "error", err)
	}
	if err := r.Close(sig.hurry); err != nil {
		log.Error("closing the reaper", "error", err)
		status = 1
	}
	log.Info("reaper stopped")
	return status
}

func authText(tokens map[string]string) string {
	if len(tokens) == 0 {
		return "no authentication (loopback only)"
	}
	ids := map[string]bool{}
	for _, id := range tokens {
		ids[id] = true
	}
	return fmt.Sprintf("bearer token required (%d identities)", len(ids))
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
