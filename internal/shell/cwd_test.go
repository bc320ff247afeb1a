package shell

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLastCwd: whatever the shell and the processes holding the pipe write into the working-directory
// pipe, the session's directory becomes an absolute path without NUL that fits in PATH_MAX, or stays
// as it was; and what the trap writes last (pwd's line and a NUL) comes back exactly, whatever came
// before it.
func FuzzLastCwd(f *testing.F) {
	for _, s := range []string{"/\n\x00", "/tmp\n\x00", "/tmp\x00", "relative\n\x00", "/a\nb\n\x00", "/a\n\n\x00",
		"garbage\x00/x\n\x00", "/x\n\x00trailing", "", "\x00", "/" + strings.Repeat("x", maxPath) + "\n\x00", strings.Repeat("y", 3*maxPath)} {
		f.Add([]byte(s), "/tmp/dir")
	}
	f.Fuzz(func(t *testing.T, b []byte, pwd string) {
		dir, ok := lastCwd(b)
		if ok && (!strings.HasPrefix(dir, "/") || strings.IndexByte(dir, 0) >= 0 || len(dir) >= maxPath) {
			t.Errorf("lastCwd(%q) = %q", b, dir)
		}
		if !filepath.IsAbs(pwd) || strings.IndexByte(pwd, 0) >= 0 || len(pwd) >= maxPath {
			return
		}
		stream := append(bytes.Clone(b), '\x00') // whatever came before ends at the trap's write
		stream = append(append(stream, pwd...), '\n', 0)
		if dir, ok := lastCwd(stream); !ok || dir != pwd {
			t.Errorf("lastCwd(%q) = %q, %v; want %q", stream, dir, ok, pwd)
		}
	})
}

// lastCwd is ReadCwd's parsing of everything b holds.
func lastCwd(b []byte) (string, bool) {
	var c cwdTail
	c.Write(b)
	return c.dir()
}
