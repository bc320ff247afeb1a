package testutil

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// httpTimeout bounds every request a test makes: longer than any answer a test waits for (a DELETE
// during a long call is answered within a second), short enough that a server that never answers
// fails the test instead of hanging it until go test's own timeout.
const httpTimeout = 2 * time.Minute

// Do sends req with a deadline of httpTimeout (http.DefaultClient has none).
func Do(req *http.Request) (*http.Response, error) {
	c := http.Client{Timeout: httpTimeout}
	return c.Do(req)
}

// Get asks for url with a bearer token if token is set, and returns the status and the body; it
// fails the test if there is no answer.
func Get(t testing.TB, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
