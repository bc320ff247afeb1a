package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The framing of the stdio transport (see StdioTransport): newline-delimited JSON-RPC messages, each
// at most a limit long, read and written whole.

// lockedWriter serialises writes: the SDK writes each message with one Write under its own lock, and
// the refusals of oversized messages come from the reading goroutine.
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

// lineReader hands out its source line by line, each line whole, and drops (reporting it to refuse)
// every line that messageLimits refuses, without keeping more of it than the largest message a
// method may send, and every line that is no JSON-RPC message (see malformed): the SDK's reader ends
// the whole connection at the first such line. At the end of the source it holds the end back until
// the requests it handed out are answered (see inputEnd). It is read by one goroutine, the SDK's
// reader.
type lineReader struct {
	src    *bufio.Reader
	limits messageLimits
	refuse func(id []byte, code int, why string, size int64)
	input  *inputEnd // nil: the end is handed on at once
	line   []byte    // the line being handed out
	off    int       // how much of line has been handed out
	err    error     // the source's error, returned once line is handed out
	// batch is set once a line holds a JSON-RPC batch (an array), before the SDK reads it: the SDK
	// then answers with one message for the batch (see responseConn).
	batch atomic.Bool
}

func (l *lineReader) Read(p []byte) (int, error) {
	for l.off >= len(l.line) {
		if l.err != nil {
			if l.input != nil {
				l.input.end()
			}
			return 0, l.err
		}
		l.next()
	}
	n := copy(p, l.line[l.off:])
	l.off += n
	return n, nil
}

func (*lineReader) Close() error { return nil }

// next reads the next line into line, or refuses it. A line cut by the end of the source counts as
// a line; the end comes after it.
func (l *lineReader) next() {
	if cap(l.line) > 1<<20 {
		l.line = nil // do not keep an oversized buffer for the small messages that follow
	}
	l.line, l.off = l.line[:0], 0
	sc := l.limits.scanner()
	var size int64
	over := false
	for {
		chunk, err := l.src.ReadSlice('\n')
		size += int64(len(chunk))
		sc.Feed(chunk)
		if !over && len(l.line)+len(chunk) > l.limits.most() {
			over, l.line = true, l.line[:0]
		}
		if !over {
			l.line = append(l.line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		l.err = err
		if why := l.limits.check(sc, size); why != "" {
			l.line = l.line[:0]
			l.refuse(sc.ID(), codeInvalidRequest, why, size)
			return
		}
		if sc.Batch {
			l.batch.Store(true)
			return
		}
		if code, why := malformed(l.line); why != "" {
			l.line = l.line[:0]
			id := sc.ID()
			if id == nil {
				id = []byte("null") // JSON-RPC's answer to what it cannot tie to a request
			}
			l.refuse(id, code, why, size)
			return
		}
		if id := sc.ID(); id != nil && sc.Method() != "" && l.input != nil {
			l.input.read(id)
		}
		return
	}
}

// codeParseError is JSON-RPC's "Parse error": the text is not JSON.
const codeParseError = -32700

// malformed returns why line is no JSON-RPC message the SDK would take, and the error's code; ""
// for a message, a blank line, or a batch (which the SDK checks itself). It decodes the envelope
// only: the rest of the text is checked for JSON syntax, not kept.
func malformed(line []byte) (code int, why string) {
	text := bytes.TrimSpace(line)
	if len(text) == 0 || text[0] == '[' {
		return 0, ""
	}
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
	}
	if err := json.Unmarshal(text, &env); err != nil { // which checks the whole text's syntax first
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return codeParseError, "not JSON (" + err.Error() + "): each line must be one JSON-RPC message; nothing of it was run"
		}
		return codeInvalidRequest, "not a JSON-RPC message (" + err.Error() + "); nothing of it was run"
	}
	switch id := bytes.TrimSpace(env.ID); {
	case env.JSONRPC != "2.0":
		return codeInvalidRequest, `not a JSON-RPC message: "jsonrpc" must be "2.0"; nothing of it was run`
	case len(id) > 0 && id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9') && string(id) != "null":
		return codeInvalidRequest, `not a JSON-RPC message: "id" must be a string or a number; nothing of it was run`
	case env.Method == nil && (len(id) == 0 || string(id) == "null"):
		return codeInvalidRequest, `not a JSON-RPC message: a request names a "method", a response its request's "id"; nothing of it was run`
	}
	return 0, ""
}

// inputEnd holds back the end of a stdio client's input until every request read before it has its
// answer. The SDK stops writing the moment its reader sees the end, and drops every response not
// written by then: whether a request read just before the end was answered was a race (an
// initialize piped into reaper serve was answered 14 times in 20). Now the end is handed on once
// every request read before it is answered, or after wait at the latest (a command that resists its
// kill); tool calls still running at the end are cut short, their commands killed, and answered
// with what they had (see inSession), and tool calls that had not begun are refused. The session
// then ends, as it always did at the end of its input.
type inputEnd struct {
	wait time.Duration // the longest the end is held back; fixed at creation
	// ended is cancelled, with errInputEnded as its cause, when the input ends.
	ended  context.Context
	cancel context.CancelCauseFunc

	// mu guards the fields that follow. It is a leaf: held over map and channel updates only.
	mu      sync.Mutex
	pending map[idKey]int // requests handed to the SDK and not answered yet, by id
	at      time.Time     // when the input ended; zero before
	idle    chan struct{} // made at the end while requests are pending, closed when none is
}

// idKey is a request's id as the SDK reads it: a number (truncated to an integer, as the SDK does)
// or a string.
type idKey struct {
	num   int64
	str   string
	isStr bool
}

func newInputEnd(wait time.Duration) *inputEnd {
	in := &inputEnd{wait: wait, pending: map[idKey]int{}}
	in.ended, in.cancel = context.WithCancelCause(context.Background())
	return in
}

// read counts a request with the id raw (as it stands in the text) that is handed to the SDK.
func (in *inputEnd) read(raw []byte) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	var k idKey
	switch v := v.(type) {
	case float64:
		k = idKey{num: int64(v)}
	case string:
		k = idKey{str: v, isStr: true}
	default:
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.pending[k]++
}

// answered counts the response to the request id as written.
func (in *inputEnd) answered(id jsonrpc.ID) {
	var k idKey
	switch v := id.Raw().(type) {
	case int64:
		k = idKey{num: v}
	case string:
		k = idKey{str: v, isStr: true}
	default:
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.pending[k] > 1 {
		in.pending[k]--
		return
	}
	delete(in.pending, k)
	if len(in.pending) == 0 && in.idle != nil {
		close(in.idle)
		in.idle = nil
	}
}

// end marks the end of the input, the first time, and returns once every request read before it is
// answered, or wait after it.
func (in *inputEnd) end() {
	in.mu.Lock()
	if !in.at.IsZero() {
		in.mu.Unlock()
		return
	}
	in.at = time.Now()
	in.cancel(errInputEnded)
	var idle chan struct{}
	if len(in.pending) > 0 {
		in.idle = make(chan struct{})
		idle = in.idle
	}
	in.mu.Unlock()
	if idle == nil {
		return
	}
	timer := time.NewTimer(in.wait)
	defer timer.Stop()
	select {
	case <-idle:
	case <-timer.C:
	}
}

// endedAt returns when the input ended; zero while it has not.
func (in *inputEnd) endedAt() time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.at
}

// errInputEnded is why a tool call is cut short, or not begun, once the stdio client has closed
// reaper's input.
var errInputEnded = errors.New("the client closed reaper's input (stdin): the session ends, and everything it started is killed")
