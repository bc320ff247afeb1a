package sdkfix

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// inputEnd holds back the end of a stdio client's input until every request read before it has its
// answer, or wait at the latest: once its reader sees the end, the SDK's connection refuses every
// write, dropping those answers (an initialize piped into reaper serve was answered 14 times in 20).
// Meanwhile the caller sees the end (Stdio.Ended) and cuts short the calls still running. Waits for:
// modelcontextprotocol/go-sdk#1061 (PR #1067 lets writes drain after a read EOF); delete this file
// when it lands, and keep Ended from the SDK's own end of the input.
type inputEnd struct {
	wait time.Duration // the longest the end is held back; fixed at creation
	// afterEnd, if set, is called once the end is handed on (see end); fixed at creation.
	afterEnd func()
	// ended is cancelled when the input ends.
	ended  context.Context
	cancel context.CancelFunc

	// mu guards the fields that follow. It is a leaf: held over map and channel updates only.
	mu      sync.Mutex
	pending map[any]int   // requests handed to the SDK and not answered yet, by idKey
	at      time.Time     // when the input ended; zero before
	idle    chan struct{} // made at the end while requests are pending, closed when none is
}

// idKey is a request's id v (as encoding/json or jsonrpc.ID.Raw gives it) as the SDK reads it: an
// int64 for a number (truncated to an integer, as the SDK does) or a string; nil for neither.
func idKey(v any) any {
	switch v := v.(type) {
	case float64:
		return int64(v)
	case int64, string:
		return v
	}
	return nil
}

func newInputEnd(wait time.Duration) *inputEnd {
	in := &inputEnd{wait: wait, pending: map[any]int{}}
	in.ended, in.cancel = context.WithCancel(context.Background())
	return in
}

// read counts a request with the id raw (as it stands in the text) that is handed to the SDK.
func (in *inputEnd) read(raw []byte) {
	var v any
	if json.Unmarshal(raw, &v) != nil || idKey(v) == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.pending[idKey(v)]++
}

// answered counts the response to the request id as written.
func (in *inputEnd) answered(id jsonrpc.ID) {
	k := idKey(id.Raw())
	if k == nil {
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
	in.cancel()
	var idle chan struct{}
	if len(in.pending) > 0 {
		in.idle = make(chan struct{})
		idle = in.idle
	}
	in.mu.Unlock()
	if in.afterEnd != nil {
		defer in.afterEnd()
	}
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
