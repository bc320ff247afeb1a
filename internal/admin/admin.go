// Package admin serves reaper's admin endpoint: liveness (/healthz), readiness (/readyz) and
// metrics (/metrics), on a listener of its own, apart from MCP, so that probes and scrapers need no
// MCP credential.
//
// /healthz answers anyone. /readyz answers anyone with its status code (for probes), and says why
// only to requests that reached a loopback address or carry the admin token. /metrics requires the
// admin bearer token when one is set ([Options.Token]); the caller decides where the endpoint may
// listen without one. Every request is bounded in time and size (httpguard.NewServer), a loopback
// listener answers only loopback Host names (DNS rebinding), and cross-origin browser requests are
// refused.
//
// Lock order. The package has one lock, Server.mu, a leaf held for the readiness fields only.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cgreaper/reaper/internal/httpguard"
)

// Options configures a Server. The zero value serves /healthz and /readyz, and /metrics as 404.
type Options struct {
	// Token, if set, must come as "Authorization: Bearer <Token>" on every /metrics request.
	Token   string
	Metrics http.Handler // serves /metrics; nil answers 404
	Logger  *slog.Logger // the HTTP server's own errors; nil discards
}

// Server is the admin endpoint. Its readiness starts false ("starting"). It is safe for concurrent
// use.
type Server struct {
	opts  Options  // this and the fields up to mu are fixed at creation
	token [32]byte // SHA-256 of the token, compared in constant time
	hs    *http.Server
	wg    sync.WaitGroup // the serving goroutine

	// mu guards the fields that follow.
	mu     sync.Mutex
	ready  bool
	status string
}

// New returns a Server that is not ready yet.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, token: sha256.Sum256([]byte(opts.Token)), status: "starting"}
	// Every answer is short: a client that reads it slowly is cut off too.
	s.hs = httpguard.NewServer(s.Handler(), httpguard.Options{
		ReadHeaderTimeout: 5 * time.Second,
		BodyTimeout:       5 * time.Second,
		IdleTimeout:       time.Minute,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	})
	return s
}

// SetReady sets what /readyz answers: 200 when ready, 503 when not, with status as the body's
// explanation (the containment mode and why, say, or "shutting down").
func (s *Server) SetReady(ready bool, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready, s.status = ready, status
}

// Serve serves on ln in a goroutine of its own until Close. It must be called at most once.
func (s *Server) Serve(ln net.Listener) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logger.Error("admin endpoint failed", "error", err)
		}
	}()
}

// Close stops serving, lets requests under way finish for up to a second, and returns once the
// serving goroutine has. It is idempotent.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.hs.Shutdown(ctx)
	if err != nil {
		err = s.hs.Close()
	}
	s.wg.Wait()
	return err
}

// Handler returns the endpoint's handler: /healthz, /readyz and /metrics, GET and HEAD only, behind
// the Host and Origin checks.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /metrics", s.metrics)
	return httpguard.CheckHost(httpguard.CheckOrigin(mux))
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ready, status := s.ready, s.status
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.opts.Token != "" && !httpguard.OnLoopback(r) && !s.authorized(r) {
		status = "details need the admin token" // the status code is what a probe needs
	}
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %s\n", status)
		return
	}
	fmt.Fprintf(w, "ready: %s\n", status)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.opts.Metrics == nil {
		http.NotFound(w, r)
		return
	}
	if s.opts.Token != "" && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="reaper admin"`)
		http.Error(w, "/metrics needs the admin token (--admin-token) as a bearer token", http.StatusUnauthorized)
		return
	}
	s.opts.Metrics.ServeHTTP(w, r)
}

// authorized reports whether r carries the token, comparing digests in constant time so that neither
// the token's length nor its content leaks through timing.
func (s *Server) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1
}
