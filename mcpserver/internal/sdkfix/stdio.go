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
// reaper cannot live with.
//
//  1. Framing (lines.go). The SDK reads its input with one streaming JSON decoder and ends the whole
//     connection at the first line it cannot decode or that is over MaxLineLength: one bad line
//     from a client, or one over reaper's limits, and the session ends and every process it started
//     is killed. Here each line is read whole, measured against the caller's Limits as it comes
//     (without keeping more of an over-long one than the largest message may be), checked for a
//     JSON-RPC envelope, and either handed to the SDK or answered with a JSON-RPC error that says
//     why (a notification over the limits gets none); the connection goes on, as the HTTP handler's
//     does. Waits for: modelcontextprotocol/go-sdk#1209 (a malformed frame ends the session; PR
//     #1210 answers -32700 and reads on) and #984 (a bound on a frame's size, PR #985 closed); a
//     refusal by size that still answers, and a hook for the caller's own bounds, are filed nowhere.
//     Delete lines.go, and NewStdio's reader, when the SDK reads on after both.
//  2. The end of the input (inputend.go). When its reader sees the end, the SDK's connection refuses
//     every write from then on, so the answers to requests read just before the end are dropped
//     (an initialize piped into reaper serve was answered 14 times in 20). Here the end is held back
//     until those requests are answered, or EndWait at the latest. Waits for:
//     modelcontextprotocol/go-sdk#1061 (PR #1067 lets writes drain after a read EOF); delete
//     inputend.go when it lands, and keep Ended from the SDK's own end of the input.
//  3. Responses written around their results (respond.go): a per-call cost, see there.

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
func (t *Stdio) EndedAt() time.Time { return t.input.endedAt() }

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
