package sdkfix

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/cgreaper/reaper/internal/jsonlimit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stdio transport: mcp.IOTransport with three changes, each for something the SDK's does that
// reaper cannot live with, each said, with what it waits for, in its own file: the framing
// (lines.go: a bad or over-long line is answered and dropped, where the SDK ends the connection),
// the end of the input (inputend.go: the answers to the requests read before it are written), and
// responses written around their results (respond.go: a per-call cost).

// Limits are the bounds each line is held to before the SDK decodes it.
type Limits interface {
	// Scanner returns a fresh scanner for one line.
	Scanner() *jsonlimit.Scanner
	// Most is the longest message any method may send: the most of a line that is kept.
	Most() int
	// Check returns why a line of size bytes, scanned by sc, is refused, or "" if it is not.
	Check(sc *jsonlimit.Scanner, size int64) string
}

// StdioOptions configures NewStdio.
type StdioOptions struct {
	// Limits bound every line. Required.
	Limits Limits
	// Refused is told of every line refused (its id as it stands in the text, nil for none; why;
	// its size) before its answer is written. Nil: nothing is told.
	Refused func(id []byte, why string, size int64)
	// EndWait is the longest the end of the input is held back for the answers to the requests
	// read before it (see inputEnd).
	EndWait time.Duration
}

// Stdio is the transport of one client over a reader and a writer (stdin and stdout). Closing it
// closes neither.
type Stdio struct {
	inner *mcp.IOTransport
	out   *lockedWriter // where inner writes too: each message with one Write
	lines *lineReader
	input *inputEnd
}

// NewStdio returns the transport for one client over in and out: newline-delimited JSON-RPC, as
// mcp.IOTransport, with the changes this file's comment lists.
func NewStdio(in io.Reader, out io.Writer, opts StdioOptions) *Stdio {
	w := &lockedWriter{w: out}
	input := newInputEnd(opts.EndWait)
	r := &lineReader{src: bufio.NewReaderSize(in, 64<<10), limits: opts.Limits, input: input}
	r.refuse = func(id []byte, code int, why string, size int64) {
		if opts.Refused != nil {
			opts.Refused(id, why, size)
		}
		if line := ErrorLine(id, code, why); line != nil {
			w.Write(line)
		}
	}
	return &Stdio{inner: &mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: -1}, out: w, lines: r, input: input}
}

// Connect connects the SDK's connection over the lines, whose responses are written as
// responseConn writes them.
func (t *Stdio) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &responseConn{Connection: c, out: t.out, batch: &t.lines.batch, input: t.input}, nil
}

// Ended returns a context that is done once the input has ended, before its end is handed to the
// SDK (which the requests still running hold back).
func (t *Stdio) Ended() context.Context { return t.input.ended }

// EndedAt returns when the input ended; zero while it has not.
func (t *Stdio) EndedAt() time.Time {
	t.input.mu.Lock()
	defer t.input.mu.Unlock()
	return t.input.at
}

// lockedWriter serialises writes: the SDK writes each message with one Write under its own lock, and
// the refusals of lines come from the reading goroutine.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lockedWriter) Close() error { return nil }

// ErrorLine returns a JSON-RPC error response to the request with id (as it stands in its text),
// with its newline; nil for a message without an id (a notification), which gets no answer.
func ErrorLine(id []byte, code int, msg string) []byte {
	if id == nil {
		return nil
	}
	return answerLine(id, "error", map[string]any{"code": code, "message": msg})
}

// answerLine returns the JSON-RPC response to the request with id (as it stands in its text) whose
// member key ("result" or "error") is v, with its newline; nil for an id that is not valid JSON
// after all, which gets no answer.
func answerLine(id []byte, key string, v any) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), key: v})
	if err != nil {
		return nil
	}
	return append(b, '\n')
}
