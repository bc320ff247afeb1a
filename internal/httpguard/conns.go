package httpguard

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Connections are counted from their accept to their close, and until they authenticate also by
// peer: a client's address, or on loopback, where every local user shares 127.0.0.1, the uid that
// owns the client's socket. One over a limit is answered 503 and closed before any of it is read.
// Once a request on a connection authenticates (Authenticated), the connection counts under that
// identity, its first, until it closes, so that one token's holder cannot take every connection; one
// over its identity's limit is answered 503 and closed after that request. (A proxy that pools
// connections for several identities is not refused midway, and holds no more than their share.)

// ConnLimits bounds a listener's connections. Zero values mean the defaults.
type ConnLimits struct {
	// Total bounds the open connections, authenticated or not; zero means DefaultMaxConns.
	Total int
	// Unauthenticated bounds the connections that have not authenticated (see Authenticated);
	// zero means a quarter of Total (at least one).
	Unauthenticated int
	// PerPeer bounds the connections of one peer that have not authenticated; zero means an eighth
	// of Unauthenticated, at least DefaultMinPerPeer and at most Unauthenticated: enough for a
	// client that opens many connections at once (a pool of 64 DELETEs, say), while it takes eight
	// local users to fill what may wait to authenticate.
	PerPeer int
	// PerIdentity bounds the connections that authenticated as one identity; zero means Total.
	PerIdentity int
	// Refused, if set, is told of every connection refused, with the limit it met: "total",
	// "unauthenticated", "peer" or "identity" (for metrics). It must not block.
	Refused func(limit string)
}

// Defaults for zero ConnLimits fields.
const (
	DefaultMaxConns   = 1024
	DefaultMinPerPeer = 32
)

// Limit returns ln with its connections bounded by lim. Serve it with a server from NewServer, whose
// ConnContext lets Authenticated find a request's connection.
func Limit(ln net.Listener, lim ConnLimits) net.Listener {
	lim.Total = orDefault(lim.Total, DefaultMaxConns)
	lim.Unauthenticated = orDefault(lim.Unauthenticated, max(lim.Total/4, 1))
	lim.PerPeer = orDefault(lim.PerPeer, min(max(lim.Unauthenticated/8, DefaultMinPerPeer), lim.Unauthenticated))
	lim.PerIdentity = orDefault(lim.PerIdentity, lim.Total)
	return &limitedListener{Listener: ln, lim: lim, peers: map[string]int{}, ids: map[string]int{}}
}

// limitedListener counts its connections (see Limit).
type limitedListener struct {
	net.Listener
	lim ConnLimits // fixed at creation

	// mu guards the fields that follow; a leaf (taken inside limitedConn.mu), held for counting only.
	mu     sync.Mutex
	total  int
	unauth int
	peers  map[string]int // connections not authenticated, by peer
	ids    map[string]int // connections authenticated, by identity
}

// Accept returns the next connection within the limits; one over them is answered and closed here.
func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer := peerOf(c)
		if limit := l.admit(peer); limit != "" {
			refuse(c, limit, peer)
			l.refused(limit)
			continue
		}
		return &limitedConn{Conn: c, l: l, peer: peer}, nil
	}
}

// admit counts a new connection of peer, or returns the limit it meets.
func (l *limitedListener) admit(peer string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.total >= l.lim.Total:
		return "total"
	case l.unauth >= l.lim.Unauthenticated:
		return "unauthenticated"
	case l.peers[peer] >= l.lim.PerPeer:
		return "peer"
	}
	l.total++
	l.unauth++
	l.peers[peer]++
	return ""
}

// admitIdentity moves a connection of peer that authenticated as id from its peer's count to id's,
// or reports false, counting nothing, when id holds as many as it may.
func (l *limitedListener) admitIdentity(peer, id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ids[id] >= l.lim.PerIdentity {
		return false
	}
	l.ids[id]++
	l.unauth--
	uncount(l.peers, peer)
	return true
}

// release uncounts a closed connection of peer, authenticated as id if authed.
func (l *limitedListener) release(peer, id string, authed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if authed {
		uncount(l.ids, id)
		return
	}
	l.unauth--
	uncount(l.peers, peer)
}

func uncount(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

func (l *limitedListener) refused(limit string) {
	if l.lim.Refused != nil {
		l.lim.Refused(limit)
	}
}

// refuse answers a connection over a limit and closes it. The answer fits in the socket's buffer:
// the write does not wait for the client, beyond a short deadline in case it would.
func refuse(c net.Conn, limit, peer string) {
	why := map[string]string{
		"total":           "reaper has as many connections open as it allows (--max-connections)",
		"unauthenticated": "reaper has as many connections waiting to authenticate as it allows (a quarter of --max-connections)",
		"peer":            "this client (" + peer + ") has as many connections waiting to authenticate as reaper allows one client (--max-connections-per-peer)",
	}[limit]
	body := why + "; close idle connections or try again later\n"
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.Close()
}

type limitedConn struct {
	net.Conn
	l    *limitedListener
	peer string

	// mu guards the fields that follow. Lock order: mu, then limitedListener.mu.
	mu     sync.Mutex
	authed bool
	id     string // the identity it first authenticated as, once authed
	closed bool
}

func (c *limitedConn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.l.release(c.peer, c.id, c.authed)
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// authenticate moves the connection from the count of those waiting to authenticate to id's, unless
// it is already counted under an identity (its first), and reports false if id holds as many as it
// may.
func (c *limitedConn) authenticate(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.authed || c.closed {
		return true
	}
	if !c.l.admitIdentity(c.peer, id) {
		return false
	}
	c.authed, c.id = true, id
	return true
}

// peerOf names a connection's peer for its count: "uid N" on loopback where the kernel says who owns
// the client's socket, else its address.
func peerOf(c net.Conn) string {
	remote, err1 := netip.ParseAddrPort(c.RemoteAddr().String())
	local, err2 := netip.ParseAddrPort(c.LocalAddr().String())
	if err1 != nil || err2 != nil {
		return c.RemoteAddr().String()
	}
	if remote.Addr().Unmap().IsLoopback() {
		if uid, err := loopbackUID(local, remote); err == nil {
			return "uid " + strconv.FormatUint(uint64(uid), 10)
		}
	}
	return remote.Addr().Unmap().String()
}

type connKey struct{}

// connContext puts a request's connection in its context, for Authenticated.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// Authenticated records that r's connection authenticated as identity id: it no longer counts among
// its peer's connections waiting to, but among id's (see Limit). A handler calls it once a credential
// is checked, and goes on if it returns true. If id already holds as many connections as it may,
// Authenticated answers r 503 with the reason, closes the connection after the answer, and returns
// false.
func Authenticated(w http.ResponseWriter, r *http.Request, id string) bool {
	c, ok := r.Context().Value(connKey{}).(*limitedConn)
	if !ok || c.authenticate(id) {
		return true
	}
	c.l.refused("identity")
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "1")
	http.Error(w, fmt.Sprintf("your identity (%s) has %d connections open, the most one identity may (--max-connections-per-identity); close idle connections or try again later", id, c.l.lim.PerIdentity), http.StatusServiceUnavailable)
	return false
}

// Peer returns the name Limit gave r's peer ("uid N" on loopback, else its address), or "" for a
// connection Limit did not count.
func Peer(r *http.Request) string {
	if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		return c.peer
	}
	return ""
}
