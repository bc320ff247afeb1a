package sdkfix

import (
	"context"
	"time"
)

// KeepAlive pings a client every interval until stop is done, each ping with a whole interval to be
// answered, and returns true once misses pings in a row went unanswered: the caller then ends the
// session. Pings follow each other without overlapping, so a client that vanished without closing its
// connection is found about misses+1 intervals after its last answer. missed, if not nil, is told of
// each unanswered ping before the next. It returns false when stop is done first.
//
// The SDK's keepalive (ServerOptions.KeepAlive) gives each ping half the interval, which a client
// busy for a moment misses, and after KeepAliveFailureThreshold misses calls the session's Close,
// which waits for the running tool calls, which may wait for the very processes that should die
// first. Waits for: a keepalive that hands its verdict to the server; none is filed. Delete this
// file, and use ServerOptions.KeepAlive with its threshold, when it lands.
func KeepAlive(stop context.Context, interval time.Duration, misses int, ping func(context.Context) error, missed func(n int, err error)) bool {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-stop.Done():
			return false
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(stop, interval)
		err := ping(ctx)
		cancel()
		if stop.Err() != nil {
			return false
		}
		if err == nil {
			n = 0
			continue
		}
		n++
		if missed != nil {
			missed(n, err)
		}
		if n >= misses {
			return true
		}
	}
}
