package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// block is a fenced code block of a document: its info string (sh, console, json, ...), its text,
// and where it starts, for messages.
type block struct {
	lang, text, where string
}

// documents returns the Markdown files a user reads: README.md and everything under docs/, relative
// to the repository's root.
func documents(t *testing.T) []string {
	t.Helper()
	docs := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(repo, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(repo, path)
			docs = append(docs, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// read returns a document's text.
func read(t *testing.T, doc string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, doc))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var fence = regexp.MustCompile("(?m)^```([a-z]*)\n")

// blocks returns the fenced code blocks of a document.
func blocks(t *testing.T, doc string) []block {
	t.Helper()
	text := read(t, doc)
	var out []block
	for rest, off := text, 0; ; {
		m := fence.FindStringSubmatchIndex(rest)
		if m == nil {
			return out
		}
		body := rest[m[1]:]
		end := strings.Index(body, "\n```")
		if end < 0 {
			t.Fatalf("%s: a code block that opens at byte %d never closes", doc, off+m[0])
		}
		line := strings.Count(text[:off+m[0]], "\n") + 1
		out = append(out, block{lang: rest[m[2]:m[3]], text: body[:end+1], where: doc + ":" + strconv.Itoa(line)})
		skip := m[1] + end + len("\n```")
		rest, off = rest[skip:], off+skip
	}
}

// commands splits an sh block into the commands a user types: continuation lines joined, comments
// and blank lines dropped.
func commands(sh string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(sh, "\n") {
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		cmd := strings.TrimSpace(stripComment(cur.String()))
		cur.Reset()
		if cmd != "" {
			out = append(out, cmd)
		}
	}
	return out
}

// stripComment drops a shell comment: a # at the start of a word outside quotes.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}
