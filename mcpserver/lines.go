package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// The framing of the stdio transport (see StdioTransport): newline-delimited JSON-RPC messages, each
// at most a limit long, read and written whole.

// codeInvalidRequest is JSON-RPC's "Invalid Request".
const codeInvalidRequest = -32600

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
// every line longer than limit bytes, newline included, without keeping more than limit bytes of it.
// It is read by one goroutine, the SDK's reader.
type lineReader struct {
	src    *bufio.Reader
	limit  int
	refuse func(size int64, id json.RawMessage)
	line   []byte // the line being handed out
	off    int    // how much of line has been handed out
	err    error  // the source's error, returned once line is handed out
	// batch is set once a line holds a JSON-RPC batch (an array), before the SDK reads it: the SDK
	// then answers with one message for the batch (see responseConn).
	batch atomic.Bool
}

func (l *lineReader) Read(p []byte) (int, error) {
	for l.off >= len(l.line) {
		if l.err != nil {
			return 0, l.err
		}
		l.next()
	}
	n := copy(p, l.line[l.off:])
	l.off += n
	return n, nil
}

func (*lineReader) Close() error { return nil }

// next reads the next line into line, or refuses it. A line cut by the end of the source is handed
// out as it is (the SDK reports it as malformed); the end comes after it.
func (l *lineReader) next() {
	if cap(l.line) > 1<<20 {
		l.line = nil // do not keep an oversized buffer for the small messages that follow
	}
	l.line, l.off = l.line[:0], 0
	var over *idScanner
	var size int64
	for {
		chunk, err := l.src.ReadSlice('\n')
		size += int64(len(chunk))
		if over == nil && len(l.line)+len(chunk) > l.limit {
			over = &idScanner{}
			over.feed(l.line)
			l.line = l.line[:0]
		}
		if over != nil {
			over.feed(chunk)
		} else {
			l.line = append(l.line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		l.err = err
		if over != nil {
			l.refuse(size, over.id)
		} else if isBatch(l.line) {
			l.batch.Store(true)
		}
		return
	}
}

// isBatch reports whether line holds a JSON array: a JSON-RPC batch.
func isBatch(line []byte) bool {
	t := bytes.TrimLeft(line, " \t\r\n")
	return len(t) > 0 && t[0] == '['
}

// idScanner finds the id of a JSON-RPC request as its bytes stream by, wherever it is among the
// object's members (clients put it before or after the params, which may be megabytes long), without
// keeping the message: it follows strings and nesting, and keeps only a top-level "id" member's value
// if it is a number or a string of at most 256 bytes.
type idScanner struct {
	id json.RawMessage // the top-level id, once its value has ended

	depth     int
	inString  bool
	escaped   bool
	key       []byte // the current top-level string, while it may still be "id"
	keyLong   bool   // it is longer than "id"
	isIDKey   bool   // the last top-level string was "id"
	capturing bool   // reading the top-level id's value
	value     []byte
}

const maxIDBytes = 256

func (s *idScanner) feed(b []byte) {
	for _, c := range b {
		s.byte(c)
	}
}

func (s *idScanner) byte(c byte) {
	if s.inString {
		s.keep(c)
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
			if s.depth == 1 && !s.capturing {
				s.isIDKey = !s.keyLong && string(s.key) == `"id"`
			}
		}
		return
	}
	switch c {
	case '"':
		s.inString = true
		if s.depth == 1 && !s.capturing {
			s.key, s.keyLong = s.key[:0], false
		}
		s.keep(c)
	case '{', '[':
		if s.capturing {
			s.capturing = false // an object or array is no id
		}
		s.depth++
	case '}', ']':
		s.end()
		s.depth--
	case ',':
		s.end()
	case ':':
		if s.depth == 1 && s.isIDKey {
			s.capturing, s.value = true, s.value[:0]
		}
		s.isIDKey = false
	case ' ', '\t', '\r', '\n':
	default:
		s.keep(c)
	}
}

// keep adds c to the string that may be the "id" key, or to the id's value.
func (s *idScanner) keep(c byte) {
	switch {
	case s.capturing:
		if len(s.value) < maxIDBytes {
			s.value = append(s.value, c)
		} else {
			s.capturing = false
		}
	case s.depth == 1:
		if len(s.key) < len(`"id"`) {
			s.key = append(s.key, c)
		} else {
			s.keyLong = true
		}
	}
}

// end ends the top-level id's value, at a comma or at the end of the object, and keeps it if it is a
// number or a string.
func (s *idScanner) end() {
	if !s.capturing || s.depth != 1 {
		return
	}
	s.capturing = false
	var v any
	if json.Unmarshal(s.value, &v) != nil {
		return
	}
	switch v.(type) {
	case string, float64:
		s.id = append(json.RawMessage(nil), s.value...)
	}
}
