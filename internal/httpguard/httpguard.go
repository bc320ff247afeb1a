// Package httpguard bounds and checks HTTP requests before anything acts on them, for reaper's MCP
// endpoint and its admin endpoint alike.
//
// [NewServer] bounds every connection in time and size before any handler sees a request (see
// Options). A body's deadline is set per request and lifted once it has been read, and a response is
// bounded write by write, not as a whole: a handler may run for an hour (a tool call), but a client
// that stops reading must not hold it, and what waits for it, for ever. [CheckHost] and
// [CheckOrigin] refuse requests that a browser page of another site could make.
package httpguard

import (
	"io"
	"log"
	"net/http"
	"sync"
	"time"
)

// Options bounds a server's connections. Zero values mean the defaults.
type Options struct {
	// ReadHeaderTimeout bounds the time to read a request's headers; zero means 10 s.
	ReadHeaderTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers; zero means 64 KiB.
	MaxHeaderBytes int
	// BodyTimeout bounds the time to read a request's body once its headers are read, whether or
	// not a handler reads it (a refused request's body is still read and discarded, up to 256 KiB,
	// by the server); zero means 30 s. It is lifted once the body is read to its end.
	BodyTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its next request; zero means
	// 2 minutes.
	IdleTimeout time.Duration
	// WriteStall bounds each write of a response (and each flush), from its start to the client's
	// taking it: a write past it fails, the request's context is cancelled, and the server closes
	// the connection. Zero means 30 s. Not used where WriteTimeout is set.
	WriteStall time.Duration
	// WriteTimeout, if set, bounds the writing of a whole response (http.Server.WriteTimeout), in
	// place of WriteStall's bound of each write: only for a server whose responses are all short.
	// Zero means none.
	WriteTimeout time.Duration
	// ErrorLog receives the server's own errors; nil means the log package's standard logger.
	ErrorLog *log.Logger
}

// Defaults for zero Options fields.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultBodyTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultWriteStall        = 30 * time.Second
)

// NewServer returns a server for h with the bounds of opts.
func NewServer(h http.Handler, opts Options) *http.Server {
	if opts.WriteTimeout <= 0 { // writeStall would lift the server's deadline for the response
		h = writeStall(h, orDefault(opts.WriteStall, DefaultWriteStall))
	}
	return &http.Server{
		Handler:           BodyDeadline(h, orDefault(opts.BodyTimeout, DefaultBodyTimeout)),
		ReadHeaderTimeout: orDefault(opts.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		MaxHeaderBytes:    orDefault(opts.MaxHeaderBytes, DefaultMaxHeaderBytes),
		IdleTimeout:       orDefault(opts.IdleTimeout, DefaultIdleTimeout),
		WriteTimeout:      opts.WriteTimeout,
		ErrorLog:          opts.ErrorLog,
		ConnContext:       connContext,
	}
}

// orDefault is v, or def where v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// BodyDeadline gives every request with a body d to send it, from when next is called (just after
// its headers are read): a read past it fails, and the server closes the connection. Once the body
// has been read to its end the deadline is lifted, so that what the handler does next (a long tool
// call, a stream of events) is not cut short. Requests without a body are untouched.
func BodyDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err == nil { // else not a connection (a test's recorder)
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { rc.SetReadDeadline(time.Time{}) }}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the body's read deadline at its end.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}

// writeStall gives every write and flush of a response d to complete (see Options.WriteStall). The
// deadline is lifted after each, so that a stream that is quiet between its events is not cut by it.
func writeStall(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Time{}); err != nil {
			// Not a connection whose deadline can be set (a test's recorder).
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&stallWriter{ResponseWriter: w, rc: rc, d: d}, r)
		// What the server writes after the handler (the rest of the buffered response) has the same
		// bound; the next request on the connection lifts it (above).
		rc.SetWriteDeadline(time.Now().Add(d))
	})
}

// stallWriter bounds each Write and Flush of a response (see writeStall).
type stallWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *stallWriter) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.d))
	defer w.rc.SetWriteDeadline(time.Time{})
	return w.ResponseWriter.Write(p)
}

func (w *stallWriter) Flush() { w.FlushError() }

// FlushError is Flush with its error, for http.ResponseController.
func (w *stallWriter) FlushError() error {
	w.rc.SetWriteDeadline(time.Now().Add(w.d))
	defer w.rc.SetWriteDeadline(time.Time{})
	return w.rc.Flush()
}

// Unwrap returns the ResponseWriter it wraps, for http.ResponseController.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
