package mcpserver

import (
	"fmt"

	"github.com/cgreaper/reaper/internal/jsonlimit"
	"github.com/cgreaper/reaper/internal/textfit"
)

// Every message is measured before the SDK decodes it, over stdio (sdkfix.NewStdio) and HTTP
// (admitBody) alike: its size by method, its depth and its count of values. Decoding costs memory in
// proportion to the values (a few hundred bytes each in a map), not to the bytes: with both bounded,
// so is what one message can cost, whatever its JSON.

// DefaultMaxCallBytes bounds a tools/call message unless Options.MaxCallBytes says otherwise: a
// command (reaper takes up to 100 KiB), the input for a task, and the options, with room to spare.
const DefaultMaxCallBytes = 1 << 20

// The bounds of every message that are not configurable.
const (
	// maxOtherBytes bounds a message of any method but tools/call (initialize, ping, lists,
	// notifications), and a message whose method cannot be read.
	maxOtherBytes = 64 << 10
	// maxDepth bounds how deeply a message's objects and arrays nest; a tool call needs 5.
	maxDepth = 32
	// maxValues bounds the values of a message; a tool call has a few dozen.
	maxValues = 10000
	// maxDrainBytes is how much of a message over its size limit is read, and thrown away, to find
	// its id and answer it; a longer one is not answered (HTTP: 413 and the connection closed).
	maxDrainBytes = 64 << 20
)

// messageLimits are what a message is held to, over stdio (as sdkfix.Limits) and HTTP (admitBody).
type messageLimits struct {
	callBytes int // tools/call (and a batch)
}

// Scanner returns a scanner for one message.
func (l messageLimits) Scanner() *jsonlimit.Scanner {
	return &jsonlimit.Scanner{Limits: jsonlimit.Limits{Depth: maxDepth, Values: maxValues}}
}

// Most is the largest message any method may send: what a reader must be ready to take whole.
func (l messageLimits) Most() int { return max(l.callBytes, maxOtherBytes) }

// Check returns why a message of size bytes, scanned by sc, is refused, or "" if it is not.
func (l messageLimits) Check(sc *jsonlimit.Scanner, size int64) string {
	method := sc.Method()
	limit, flag := int64(maxOtherBytes), ""
	if method == "tools/call" || sc.Batch {
		limit, flag = int64(l.callBytes), " (--max-call-size)"
	}
	switch {
	case size > limit:
		what := "a " + method + " message"
		if method == "tools/call" {
			what = "a tool call"
		} else if method == "" {
			what = "this message"
		}
		return fmt.Sprintf("%s of %s is over the limit of %s%s; nothing of it was run. Put large inputs in files, and send several smaller commands",
			what, textfit.ByteSize(size), textfit.ByteSize(limit), flag)
	case sc.Err != nil:
		return "message refused: " + sc.Err.Error() + "; nothing of it was run"
	}
	return ""
}
