package mcpserver

import (
	"net"
	"net/http"
	"strings"

	"github.com/cgreaper/reaper/internal/httpguard"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Every HTTP request reaches the front and the tools with the identity it was authenticated as: its
// token's (see requireBearer), or, without tokens (HTTPOptions.Unauthenticated), its peer's (byPeer).
// It travels in the request's identityHeader, which the SDK hands the tools with every request
// (mcp.RequestExtra.Header); whatever a client sent in that header is replaced first. Sessions,
// workspaces and the caps go by it.

// identityHeader carries a request's identity from the authentication to the front and the tools.
const identityHeader = "Reaper-Identity"

// identity is the identity r was authenticated as.
func identity(r *http.Request) string { return r.Header.Get(identityHeader) }

// owner is the identity a request to a tool was authenticated as; "" over stdio, which has one client.
func owner(req mcp.Request) string {
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		return extra.Header.Get(identityHeader)
	}
	return ""
}

// realm names reaper in the bearer challenge (RFC 6750, section 3).
const realm = "reaper"

// requireBearer lets through requests with one of tokens (checked by the SDK's middleware, which
// puts the identity in the request's context) and answers the others 401 with a WWW-Authenticate
// challenge, which RFC 6750 requires and the SDK sends only when OAuth metadata or scopes are
// configured, and closes their connection: a client without the token cannot keep one open by
// asking again. A request that presented no bearer token gets the bare challenge; one whose token
// was refused also gets error="invalid_token". A request let through marks its connection
// authenticated (httpguard.Authenticated).
func requireBearer(tokens map[string]string, next http.Handler) http.Handler {
	check := auth.RequireBearerToken(verifier(tokens), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	// Past the check, next gets the client's own ResponseWriter, not the challenger: the SDK's
	// streaming needs its Flusher.
	h := check(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpguard.Authenticated(r)
		id := ""
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			id = ti.UserID
		}
		r.Header.Set(identityHeader, id)
		next.ServeHTTP(w.(*challenger).ResponseWriter, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&challenger{ResponseWriter: w, r: r}, r)
	})
}

// byPeer lets every request through as its peer's identity (HTTPOptions.Unauthenticated). Its
// connection stays among those that have not authenticated, bounded per peer.
func byPeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := httpguard.Peer(r)
		if peer == "" { // a listener httpguard.Limit did not wrap: the address, without the port
			peer = r.RemoteAddr
			if host, _, err := net.SplitHostPort(peer); err == nil {
				peer = host
			}
		}
		r.Header.Set(identityHeader, "peer "+peer)
		next.ServeHTTP(w, r)
	})
}

// refuseAll answers every request 401: an HTTP handler made with neither tokens nor
// HTTPOptions.Unauthenticated fails closed.
func refuseAll() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "Unauthorized: this server has no token configured", http.StatusUnauthorized)
	})
}

// challenger adds the bearer challenge to a 401 that lacks one, and puts in its body what to send
// instead of the SDK's words.
type challenger struct {
	http.ResponseWriter
	r       *http.Request
	refused string // the body of a 401, once its header is written
}

func (c *challenger) WriteHeader(code int) {
	if code == http.StatusUnauthorized || code == http.StatusForbidden {
		c.Header().Set("Connection", "close")
	}
	if code == http.StatusUnauthorized {
		challenge := `Bearer realm="` + realm + `"`
		c.refused = "Unauthorized: send the header \"Authorization: Bearer <token>\" with a token this server accepts (reaper serve's first log line says where its token is)\n"
		scheme, _, _ := strings.Cut(c.r.Header.Get("Authorization"), " ")
		switch {
		case strings.EqualFold(scheme, "Bearer"):
			challenge += `, error="invalid_token", error_description="the bearer token is not one this server accepts"`
			c.refused = "Unauthorized: the bearer token is not one this server accepts\n"
		case c.r.Header.Get("Authorization") != "":
			c.refused = "Unauthorized: the Authorization header must be \"Bearer <token>\" (the word Bearer, a space, then the token)\n"
		}
		if c.Header().Get("WWW-Authenticate") == "" {
			c.Header().Set("WWW-Authenticate", challenge)
		}
		c.Header().Del("Content-Length")
	}
	c.ResponseWriter.WriteHeader(code)
	if c.refused != "" {
		c.ResponseWriter.Write([]byte(c.refused))
	}
}

// Write drops the SDK's body of a 401, which WriteHeader replaced.
func (c *challenger) Write(p []byte) (int, error) {
	if c.refused != "" {
		return len(p), nil
	}
	return c.ResponseWriter.Write(p)
}
