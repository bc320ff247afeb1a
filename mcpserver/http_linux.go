package mcpserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"time"

	"github.com/cgreaper/reaper/internal/httpguard"
	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configures the Streamable HTTP handler.
type HTTPOptions struct {
	// Tokens maps each accepted bearer token to the identity it stands for. A session or workspace
	// belongs to the identity that made it; no other identity can use, list or end it.
	Tokens map[string]string
	// Unauthenticated serves clients without a token: each is then known by its peer (on loopback,
	// the uid that owns its socket; otherwise its address, see httpguard.Peer), and anyone who can
	// connect runs commands. Only for an operator who asked for it by name. With neither Tokens nor
	// Unauthenticated, every request is refused (401).
	Unauthenticated bool
}

const sessionHeader = "Mcp-Session-Id"

// sessionless reports whether r is of protocol 2026-07-28 or later, which has no sessions: it names
// no session, and its MCP-Protocol-Version header (required on every request of that protocol) names
// 2026-07-28 or later. Older clients send no such header before their session exists. A request of
// the new protocol without the header reaches the stateful handler, which says it is required.
func sessionless(r *http.Request) bool {
	return r.Header.Get(sessionHeader) == "" && r.Header.Get(sdkfix.ProtocolVersionHeader) >= sdkfix.FirstSessionlessVersion
}

// HTTPHandler returns the handler for the MCP endpoint, which serves both protocol eras: Host and
// cross-origin checks, bearer authentication (see HTTPOptions), the message's bounds (admitBody),
// then by era (see sessionless) either the SDK's stateless handler, whose tools name a workspace, or
// the session front and the SDK's stateful handler. Every request the SDK would refuse is refused
// before the front acts on it: a refused request never tears a session down nor renews its lease.
func (s *Server) HTTPHandler(opts HTTPOptions) http.Handler {
	sessions := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		// The SDK's own timeout frees sessions that never ran a command; sessions that did are
		// ended (processes first) by the lease below, which fires first.
		SessionTimeout:      s.opts.IdleTimeout + time.Minute,
		MaxRequestBodyBytes: int64(s.limits.Most()),
		Logger:              s.sdkLog,
	})
	workspaces := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.ws }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: int64(s.limits.Most()),
		// In 2026-07-28 a client that closes its response stream cancels the call: a vanished
		// client's call returns, and stops holding its workspace's lease (see beginLocked).
		PropagateRequestCancellation: true,
		Logger:                       s.sdkLog,
	})
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg, ok := s.admitBody(w, r)
		if !ok {
			return
		}
		if sessionless(r) {
			if sdkfix.AnswerSetLevel(w, r, msg.method, msg.id) {
				return
			}
			workspaces.ServeHTTP(w, r)
			return
		}
		s.front(w, r, sessions, msg)
	})
	switch {
	case len(opts.Tokens) > 0:
		h = requireBearer(opts.Tokens, h)
	case opts.Unauthenticated:
		h = byPeer(h)
	default:
		h = refuseAll()
	}
	// Every check before any side effect: Host, Origin, token, then in front the version and the owner.
	return httpguard.CheckHost(httpguard.CheckOrigin(http.NewCrossOriginProtection().Handler(h)))
}

// verifier checks a bearer token against every configured token in constant time (comparing
// digests, so that neither the length nor the content of a token leaks through timing).
func verifier(tokens map[string]string) auth.TokenVerifier {
	type entry struct {
		sum      [32]byte
		identity string
	}
	var entries []entry
	for tok, id := range tokens {
		entries = append(entries, entry{sha256.Sum256([]byte(tok)), id})
	}
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		sum := sha256.Sum256([]byte(token))
		identity, found := "", 0
		for _, e := range entries {
			if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
				identity, found = e.identity, 1
			}
		}
		if found == 0 {
			return nil, fmt.Errorf("%w: unknown bearer token", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: identity}, nil
	}
}

// front handles what the SDK cannot (see sdkfix's package doc): a DELETE kills the session's
// processes before the SDK closes the session, and every POST counts for the session's idle lease
// while its connection lives. A request the SDK would refuse is refused first (sdkfix.CheckVersion).
func (s *Server) front(w http.ResponseWriter, r *http.Request, next http.Handler, msg message) {
	id := r.Header.Get(sessionHeader)
	if id == "" {
		if msg.method == "initialize" {
			// A new session: counted against the caps while the SDK makes it (see reserve).
			release, refused := s.reserve(identity(r))
			if refused != nil {
				s.opts.Observer.Refused(refused.limit)
				answerError(w, msg, http.StatusServiceUnavailable, codeBusy, refused.why)
				return
			}
			defer release()
		}
		next.ServeHTTP(w, r)
		return
	}
	if !sdkfix.CheckVersion(w, r) {
		return
	}
	s.mu.Lock()
	st := s.sessions[key{kind: kindHTTP, id: id}]
	var owner, why string
	var ended bool
	if st != nil {
		owner, ended, why = st.owner, st.state == stateEnding, st.reason.describe(s.opts.IdleTimeout)
	}
	s.mu.Unlock()
	switch {
	case st == nil:
		next.ServeHTTP(w, r) // no such session: the SDK answers 404
		return
	case owner != identity(r):
		http.Error(w, "session belongs to another identity: send the token that started it, or start a session of your own (initialize without Mcp-Session-Id)", http.StatusForbidden)
		return
	case ended:
		// Its processes are being killed; the SDK forgets it once they are dead.
		http.Error(w, "session has ended ("+why+"): start a new one (initialize without Mcp-Session-Id)", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodDelete:
		if s.delete(st) {
			next.ServeHTTP(w, r) // the SDK closes the MCP session and answers
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPost:
		s.mu.Lock()
		done := s.beginLocked(st, r.Context())
		s.mu.Unlock()
		defer done()
		next.ServeHTTP(w, r)
	default:
		// A GET holds the stream for server messages open for as long as the client lives; it is
		// activity when it starts, but does not keep an idle session alive.
		s.mu.Lock()
		st.last = time.Now()
		s.mu.Unlock()
		next.ServeHTTP(w, r)
	}
}

// deleteWait is how long a DELETE waits for its session's processes to die before it is answered
// anyway; the teardown goes on. A client's Close must not time out because a task ignores SIGTERM.
const deleteWait = 500 * time.Millisecond

// delete ends st for a DELETE and reports whether the SDK is to close the MCP session and answer:
// when there was nothing to kill, or the teardown ended while the DELETE waited (end then left the
// MCP session open, seeing deleteWaits). Otherwise the caller answers 204, and the teardown closes
// the MCP session when done. The DELETE waits for the processes' death (reaper.Session.Killed), at
// most deleteWait.
func (s *Server) delete(st *session) (toSDK bool) {
	s.mu.Lock()
	if st.state == stateIdle {
		s.mu.Unlock()
		return true
	}
	st.deleteWaits = true
	var killed <-chan struct{} // nil while the reaper session is being opened: then ended alone
	if st.rs != nil {
		killed = st.rs.Killed()
	}
	s.goLocked(func() { s.end(context.Background(), st, endDelete) }) // while closing, Close ends it
	s.mu.Unlock()
	timer := time.NewTimer(deleteWait)
	defer timer.Stop()
	select {
	case <-st.ended:
	case <-killed:
	case <-timer.C:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.deleteWaits = false
	if st.state == stateGone && !st.connClosed {
		st.connClosed = true // the SDK closes it
		return true
	}
	return false
}

// beginLocked records a request of st. The returned function records its end; it also runs when
// the client's connection (ctx) goes away first (a client killed in the middle of a long call), so
// that a vanished client cannot hold the lease open. s.mu must be held.
func (s *Server) beginLocked(st *session, ctx context.Context) func() {
	st.inFlight++
	st.last = time.Now()
	var ended bool
	finish := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if ended {
			return
		}
		ended = true
		st.inFlight--
		st.last = time.Now()
	}
	stop := context.AfterFunc(ctx, finish)
	return func() {
		stop()
		finish()
	}
}

// lease ends st once it has been idle for IdleTimeout: no request (a workspace: no call that names it)
// for that long, and none in flight on a live connection. It returns when the session leaves live.
func (s *Server) lease(st *session) {
	timer := time.NewTimer(s.opts.IdleTimeout)
	defer timer.Stop()
	for {
		select {
		case <-st.stop.Done():
			return
		case <-timer.C:
		}
		s.mu.Lock()
		wait := s.opts.IdleTimeout - time.Since(st.last)
		if st.inFlight > 0 {
			wait = s.opts.IdleTimeout
		}
		s.mu.Unlock()
		if wait > 0 {
			timer.Reset(wait)
			continue
		}
		reason := endIdle
		if st.key.kind == kindWorkspace {
			reason = endExpired
		}
		s.end(context.Background(), st, reason)
		return
	}
}
