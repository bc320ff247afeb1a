package mcpserver

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// realm names reaper in the bearer challenge (RFC 6750, section 3).
const realm = "reaper"

// requireBearer lets through requests with one of tokens (checked by the SDK's middleware, which
// puts the identity in the request's context) and answers the others 401 with a WWW-Authenticate
// challenge, which RFC 6750 requires and the SDK sends only when OAuth metadata or scopes are
// configured. A request that presented no bearer token gets the bare challenge; one whose token
// was refused also gets error="invalid_token".
func requireBearer(tokens map[string]string, next http.Handler) http.Handler {
	check := auth.RequireBearerToken(verifier(tokens), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	// Past the check, next gets the client's own ResponseWriter, not the challenger: the SDK's
	// streaming needs its Flusher.
	h := check(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w.(*challenger).ResponseWriter, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&challenger{ResponseWriter: w, r: r}, r)
	})
}

// challenger adds the bearer challenge to a 401 that lacks one.
type challenger struct {
	http.ResponseWriter
	r *http.Request
}

func (c *challenger) WriteHeader(code int) {
	if code == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "" {
		challenge := `Bearer realm="` + realm + `"`
		if scheme, _, _ := strings.Cut(c.r.Header.Get("Authorization"), " "); strings.EqualFold(scheme, "Bearer") {
			challenge += `, error="invalid_token", error_description="the bearer token is not one this server accepts"`
		}
		c.Header().Set("WWW-Authenticate", challenge)
	}
	c.ResponseWriter.WriteHeader(code)
}
