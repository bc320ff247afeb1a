package sdkfix

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// lineReader hands out its source line by line, each line whole, and drops (reporting it to refuse)
// every line that its limits refuse, without keeping more of it than the largest message a method
// may send, and every line that is no JSON-RPC message (see malformed). At the end of the source it
// holds the end back until the requests it handed out are answered (see inputEnd). It is read by one
// goroutine, the SDK's reader.
//
// The SDK's reader ends the whole connection at the first line it cannot decode or that is over
// MaxLineLength, and with it the session and its processes; here the connection goes on, as the
// HTTP handler's does. Waits for: modelcontextprotocol/go-sdk#1209 (PR #1210 answers -32700 and
// reads on) and #984 (a bound on a frame's size, PR #985 closed); a refusal by size that still
// answers, and a hook for the caller's own bounds, are filed nowhere. Delete this file, and
// NewStdio's reader, when the SDK reads on after both.
type lineReader struct {
	src    *bufio.Reader
	limits Limits
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
	sc := l.limits.Scanner()
	var size int64
	over := false
	for {
		chunk, err := l.src.ReadSlice('\n')
		size += int64(len(chunk))
		sc.Feed(chunk)
		if !over && len(l.line)+len(chunk) > l.limits.Most() {
			over, l.line = true, l.line[:0]
		}
		if !over {
			l.line = append(l.line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		l.err = err
		if why := l.limits.Check(sc, size); why != "" {
			l.line = l.line[:0]
			l.refuse(sc.ID(), jsonrpc.CodeInvalidRequest, why, size)
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
			return jsonrpc.CodeParseError, "not JSON (" + err.Error() + "): each line must be one JSON-RPC message; nothing of it was run"
		}
		return jsonrpc.CodeInvalidRequest, "not a JSON-RPC message (" + err.Error() + "); nothing of it was run"
	}
	switch id := bytes.TrimSpace(env.ID); {
	case env.JSONRPC != "2.0":
		return jsonrpc.CodeInvalidRequest, `not a JSON-RPC message: "jsonrpc" must be "2.0"; nothing of it was run`
	case len(id) > 0 && id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9') && string(id) != "null":
		return jsonrpc.CodeInvalidRequest, `not a JSON-RPC message: "id" must be a string or a number; nothing of it was run`
	case env.Method == nil && (len(id) == 0 || string(id) == "null"):
		return jsonrpc.CodeInvalidRequest, `not a JSON-RPC message: a request names a "method", a response its request's "id"; nothing of it was run`
	}
	return 0, ""
}
