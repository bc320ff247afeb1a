package reaper

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
)

// maxPath is the longest path the kernel resolves (PATH_MAX, its terminating NUL included).
const maxPath = 4096

// readCwd returns the working directory a foreground command's shell recorded in file on its
// exit. The file is the task's to write, so it is read only as far as a path can reach: a task
// that fills it gets no memory of reaper's, and its session keeps its directory.
func readCwd(file string) (string, bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPath+1)) // the line ends with a newline
	if err != nil {
		return "", false
	}
	return parseCwd(b)
}

// parseCwd returns the directory pwd printed in b: an absolute path without NUL that fits in
// PATH_MAX, its one trailing newline removed (a directory's name may end with newlines of its own).
func parseCwd(b []byte) (string, bool) {
	b, ok := bytes.CutSuffix(b, []byte{'\n'})
	if !ok || len(b) >= maxPath || bytes.IndexByte(b, 0) >= 0 || !filepath.IsAbs(string(b)) {
		return "", false
	}
	return string(b), true
}
