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

// Connections are counted from their accept to their close, and those that have not authenticated
// also by peer: a client's address, or on loopback, where every local user and task shares
// 127.0.0.1, the uid that owns the client's socket (see loopbackUID). A connection over a limit is
// answered 503 with the reason and closed at once, before any of it is read.

// ConnLimits bounds a listener's connections. Zero values mean the defaults.
type ConnLimits struct {
	// Total bounds the open connections, authenticated or not; zero means DefaultMaxConns.
	Total int
	// Unauthenticated bounds the connections that have not authenticated (see Authenticated);
	// zero means DefaultMaxUnauthenticated.
	Unauthenticated int
	// PerPeer bounds the connections of one peer that have not authenticated; zero means
	// DefaultMaxUnauthenticatedPerPeer.
	PerPeer int
	// Refused, if set, is told of every connection refused, with the limit it met: "total",
	// "unauthenticated" or "peer" (for metrics). It must not block.
	Refused func(limit string)
}

// Defaults for zero ConnLimits fields.
const (
	DefaultMaxConns                  = 1024
	DefaultMaxUnauthenticated        = 256
	DefaultMaxUnauthenticatedPerPeer = 32
)

// Limit returns ln with its connections bounded by lim. Serve it with a server from NewServer, whose
// ConnContext lets Authenticated find a request's connection.
func Limit(ln net.Listener, lim ConnLimits) net.Listener {
	lim.Total = orDefault(lim.Total, DefaultMaxConns)
	lim.Unauthenticated = orDefault(lim.Unauthenticated, DefaultMaxUnauthenticated)
	lim.PerPeer = orDefault(lim.PerPeer, DefaultMaxUnauthenticatedPerPeer)
	return &limitedListener{Listener: ln, lim: lim, peers: map[string]int{}}
}

// limitedListener counts its connections (see Limit).
type limitedListener struct {
	net.Listener
	lim ConnLimits // fixed at creation

	// mu guards the fields that follow; a leaf, held for counting only.
	mu     sync.Mutex
	total  int
	unauth int
	peers  map[string]int // connections not authenticated, by peer
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
			if l.lim.Refused != nil {
				l.lim.Refused(limit)
			}
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

// release uncounts a connection: closed, or (closed false) authenticated.
func (l *limitedListener) release(peer string, authed, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !authed {
		l.unauth--
		if l.peers[peer]--; l.peers[peer] <= 0 {
			delete(l.peers, peer)
		}
	}
	if closed {
		l.total--
	}
}

// refuse answers a connection over a limit and closes it. The answer fits in the socket's buffer:
// the write does not wait for the client, beyond a short deadline in case it would.
func refuse(c net.Conn, limit, peer string) {
	why := map[string]string{
		"total":           "reaper has as many connections open as it allows",
		"unauthenticated": "reaper has as many connections waiting to authenticate as it allows",
		"peer":            "this client (" + peer + ") has as many connections waiting to authenticate as reaper allows one client",
	}[limit]
	body := why + "; close idle connections or try again later\n"
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.Close()
}

// limitedConn is a counted connection.
type limitedConn struct {
	net.Conn
	l    *limitedListener
	peer string

	mu     sync.Mutex // guards the fields that follow
	authed bool
	closed bool
}

func (c *limitedConn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.l.release(c.peer, c.authed, true)
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// authenticate moves the connection out of the count of those waiting to authenticate.
func (c *limitedConn) authenticate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.authed || c.closed {
		return
	}
	c.authed = true
	c.l.release(c.peer, false, false)
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

// Authenticated records that r's connection authenticated: it no longer counts among its peer's
// connections waiting to (see Limit). A handler calls it once a credential is checked.
func Authenticated(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		c.authenticate()
	}
}

// Peer returns the name Limit gave r's peer ("uid N" on loopback, else its address), or "" for a
// connection Limit did not count.
func Peer(r *http.Request) string {
	if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		return c.peer
	}
	return ""
}
