package sdkfix

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/cgreaper/reaper/internal/jsonlimit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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
	out   *serialWriter // where inner writes too: each message with one Write
	lines *lineReader
	input *inputEnd
}

// NewStdio returns the transport for one client over in and out: newline-delimited JSON-RPC, as
// mcp.IOTransport, but with the framing of lines.go (a bad or over-long line is answered and
// dropped, where the SDK ends the connection), the end of input of inputend.go, and the responses of
// respond.go.
func NewStdio(in io.Reader, out io.Writer, opts StdioOptions) *Stdio {
	w := newSerialWriter(out)
	input := newInputEnd(opts.EndWait)
	input.afterEnd = w.giveUp
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

// GiveUpAfter stops writing after d: a write under way then returns an error at once, and every
// later one fails, so that a client that stopped reading (its pipe full) cannot hold the handler
// whose answer waits, the SDK's close of the session that waits for it, and reaper's exit. The end
// of the input gives up by itself once the answers to the requests read before it are written, or
// EndWait after it. It returns the function that stops the timer.
func (t *Stdio) GiveUpAfter(d time.Duration) (stop func() bool) {
	return time.AfterFunc(d, t.out.giveUp).Stop
}

// errGaveUp is the error of a write after the writer gave up.
var errGaveUp = errors.New("stdio: writing given up: the client does not read its answers, or has gone")

// serialWriter serialises writes: the SDK writes each message with one Write under its own lock, and
// the refusals of lines come from the reading goroutine. Its own goroutine, started with it, makes the
// writes in turn; Write waits for it until the writer gives up (see Stdio.GiveUpAfter): a blocking
// write to a pipe cannot be cut short, so one under way then goes on alone until the client reads or
// closes the pipe, or the process exits, and the goroutine then ends without writing anything more.
type serialWriter struct {
	w    io.Writer
	in   chan []byte   // each message, to the goroutine that writes
	out  chan error    // the result of each, to its Write
	gone chan struct{} // closed when the writer gives up
	once sync.Once
}

func newSerialWriter(w io.Writer) *serialWriter {
	l := &serialWriter{w: w, in: make(chan []byte), out: make(chan error), gone: make(chan struct{})}
	go l.loop()
	return l
}

func (l *serialWriter) loop() {
	for {
		select {
		case <-l.gone:
			return
		case p := <-l.in:
			_, err := l.w.Write(p)
			select {
			case l.out <- err:
			case <-l.gone:
				return
			}
		}
	}
}

// Write writes p with one Write of the writer below, or fails once the writer gave up. p is not
// changed by its callers afterwards (each message is a slice of its own), so the write under way
// when Write gives up may go on reading it.
func (l *serialWriter) Write(p []byte) (int, error) {
	select {
	case l.in <- p:
	case <-l.gone:
		return 0, errGaveUp
	}
	select {
	case err := <-l.out: // the answer to p: the next message is taken only after it
		if err != nil {
			return 0, err
		}
		return len(p), nil
	case <-l.gone:
		return 0, errGaveUp
	}
}

// giveUp makes every write fail from now on, the one under way included. It is idempotent.
func (l *serialWriter) giveUp() { l.once.Do(func() { close(l.gone) }) }

// Close ends the goroutine that writes; the SDK calls it once the connection is closed, after
// which nothing it writes would be read. The file below is the caller's and stays open.
func (l *serialWriter) Close() error {
	l.giveUp()
	return nil
}

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
