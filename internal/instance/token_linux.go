package instance

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// TokenFile is the file in the state directory that holds reaper's own token.
const TokenFile = "token"

// maxStateToken bounds the token file as read: a token and its newline.
const maxStateToken = 4 << 10

// StateToken returns reaper's own bearer token, for an HTTP listener with no token configured, and
// the path of the file that holds it in the state directory stateDir ("" for the default): made on
// first use (or when it does not hold a token), kept across restarts, and shared by the instances
// that share the directory. The file is reaper's user's, mode 0600, replaced (never written through)
// when made; where two instances make it at once, both use what the file holds once they are done.
func StateToken(stateDir string) (token, path string, err error) {
	d, err := OpenStateDir(stateDir)
	if err != nil {
		return "", "", err
	}
	defer d.Close()
	path = d.Join(TokenFile)
	b, err := d.ReadFile(TokenFile, maxStateToken)
	if err == nil {
		if tok, ok := parseStateToken(b); ok {
			return tok, path, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", path, fmt.Errorf("token file: %w", err)
	}
	// 130 random bits, in base32 (rand.Text): letters and digits only, safe in any header or shell.
	if err := d.WriteFile(TokenFile, []byte(rand.Text()+"\n")); err != nil {
		return "", path, fmt.Errorf("token file: %w", err)
	}
	if b, err = d.ReadFile(TokenFile, maxStateToken); err != nil {
		return "", path, fmt.Errorf("token file: %w", err)
	}
	tok, ok := parseStateToken(b)
	if !ok {
		return "", path, fmt.Errorf("token file %s: does not hold a token after it was written", path)
	}
	return tok, path, nil
}

// parseStateToken returns the token a token file holds: its first line, which must be at least 16
// printable ASCII characters without spaces.
func parseStateToken(b []byte) (string, bool) {
	line, _, _ := strings.Cut(string(b), "\n")
	if len(line) < 16 {
		return "", false
	}
	for _, c := range []byte(line) {
		if c <= ' ' || c >= 0x7f {
			return "", false
		}
	}
	return line, true
}
