package mcpserver

import (
	"bufio"
	"errors"
	"io"
	"sync"
	"sync/atomic"
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
// method may send. It is read by one goroutine, the SDK's reader.
type lineReader struct {
	src    *bufio.Reader
	limits messageLimits
	refuse func(id []byte, why string, size int64)
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
			l.refuse(sc.ID(), why, size)
		} else if sc.Batch {
			l.batch.Store(true)
		}
		return
	}
}
