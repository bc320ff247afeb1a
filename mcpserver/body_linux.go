package mcpserver

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/cgreaper/reaper/internal/textfit"
	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// message is what the front needs to know of a request's JSON-RPC message, read before the SDK
// sees it.
type message struct {
	method string
	id     []byte // as it stands in the text; nil for a notification or an id that could not be read
}

// admitBody reads a POST's body whole, measuring it as it comes, and hands it on only if the limits
// let it through; a refused message is answered here, with a JSON-RPC error when it has an id. At
// most the largest message a method may send is kept; the rest is read (to find the id) up to
// maxDrainBytes, past which the connection is closed. It reports whether to go on.
func (s *Server) admitBody(w http.ResponseWriter, r *http.Request) (message, bool) {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return message{}, true
	}
	tooLarge := func(why string) (message, bool) { // and nothing to answer on this connection
		w.Header().Set("Connection", "close")
		http.Error(w, why, http.StatusRequestEntityTooLarge)
		s.opts.Observer.Refused(RefusedMessage)
		return message{}, false
	}
	if r.ContentLength > maxDrainBytes {
		return tooLarge("request body of " + textfit.ByteSize(r.ContentLength) + " refused: the most a message may be is " + textfit.ByteSize(int64(s.limits.Most())))
	}
	sc := s.limits.Scanner()
	most := s.limits.Most()
	var kept bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= int64(most) {
		kept.Grow(int(r.ContentLength))
	}
	chunk := make([]byte, 32<<10)
	var size int64
	for {
		n, err := r.Body.Read(chunk)
		size += int64(n)
		sc.Feed(chunk[:n])
		if size <= int64(most) {
			kept.Write(chunk[:n])
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || size > maxDrainBytes { // the client went away, was too slow, or sends without end
			why := "over " + textfit.ByteSize(maxDrainBytes)
			if err != nil {
				why = err.Error() + " after " + textfit.ByteSize(size)
			}
			return tooLarge("request body not read whole: " + why)
		}
	}
	msg := message{method: sc.Method(), id: sc.ID()}
	if why := s.limits.Check(sc, size); why != "" {
		s.opts.Observer.Refused(RefusedMessage)
		s.clientLog.Warn("HTTP message refused", "bytes", size, "why", why, "id", string(msg.id))
		status := http.StatusBadRequest
		if sc.Err == nil {
			status = http.StatusRequestEntityTooLarge
		}
		answerError(w, msg, status, jsonrpc.CodeInvalidRequest, why)
		return msg, false
	}
	r.Body = io.NopCloser(bytes.NewReader(kept.Bytes()))
	r.ContentLength = int64(kept.Len())
	return msg, true
}

// codeBusy is the JSON-RPC error of a request refused at a cap (an implementation-defined server
// error, in JSON-RPC's range for those).
const codeBusy = -32000

// answerError answers the request msg with a JSON-RPC error, or, for a notification, with status.
func answerError(w http.ResponseWriter, msg message, status, code int, why string) {
	if line := sdkfix.ErrorLine(msg.id, code, why); line != nil {
		w.Header().Set("Content-Type", "application/json")
		w.Write(line)
		return
	}
	http.Error(w, why, status)
}
