package sdkfix

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// RequireBearer lets through to next the requests whose bearer token verify accepts, with the
// TokenInfo in their context (auth.TokenInfoFromContext) and the client's own ResponseWriter (the
// SDK's streaming needs its Flusher); a TokenInfo without an expiration is accepted. Every other
// request is answered as auth.RequireBearerToken answers it, but:
//
//   - The SDK's 401 carries a WWW-Authenticate challenge only with resource metadata or scopes,
//     which static tokens have none of, and RFC 6750 requires one (clients tell "send a token" from
//     "your token is wrong" by it). Here a 401 without one gets `Bearer realm="<realm>"`, plus
//     error="invalid_token" when a bearer token was presented, and a body that says what to send
//     (hint: where an operator finds the token).
//   - A 401 or 403 closes the connection, which the SDK leaves open to a client without the token.
//
// Waits for: modelcontextprotocol/go-sdk#1134 (PR #1135 adds the error code, still only with
// metadata or scopes); the rest is filed nowhere. Delete this file when the SDK's 401 carries a
// challenge of its own.
func RequireBearer(verify auth.TokenVerifier, realm, hint string, next http.Handler) http.Handler {
	check := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	h := check(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w.(*challenger).ResponseWriter, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&challenger{ResponseWriter: w, r: r, realm: realm, hint: hint}, r)
	})
}

// challenger adds the bearer challenge to a 401 that lacks one, and puts in its body what to send
// instead of the SDK's words.
type challenger struct {
	http.ResponseWriter
	r           *http.Request
	realm, hint string
	refused     string // the body of a 401, once its header is written
}

func (c *challenger) WriteHeader(code int) {
	if code == http.StatusUnauthorized || code == http.StatusForbidden {
		c.Header().Set("Connection", "close")
	}
	if code == http.StatusUnauthorized {
		challenge := `Bearer realm="` + c.realm + `"`
		c.refused = "Unauthorized: send the header \"Authorization: Bearer <token>\" with a token this server accepts (" + c.hint + ")\n"
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
