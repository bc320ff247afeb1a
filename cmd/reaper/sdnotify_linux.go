package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"
)

// sdNotify sends state (such as "READY=1" or "STOPPING=1") to the service manager over the datagram
// socket that NOTIFY_SOCKET names, as sd_notify(3) does: a path, or an abstract socket written with a
// leading '@'. Without NOTIFY_SOCKET (reaper not started by systemd with Type=notify) it does
// nothing and returns nil. reaper does not pass NOTIFY_SOCKET on to the commands it runs.
func sdNotify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if !strings.HasPrefix(addr, "/") && !strings.HasPrefix(addr, "@") {
		return fmt.Errorf("NOTIFY_SOCKET=%s: only unix datagram sockets (a path or @abstract) are supported", addr)
	}
	// The net package maps a leading '@' to Linux's abstract namespace.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notifying the service manager of %q: %w", state, err)
	}
	defer conn.Close()
	// A datagram socket whose reader does not read blocks the writer once its queue is full: the
	// notification is given up after a second rather than hold reaper's start or its shutdown.
	conn.SetWriteDeadline(time.Now().Add(notifyTimeout))
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notifying the service manager of %q at %s: %w", state, addr, err)
	}
	return nil
}

// notifyTimeout bounds the sending of one notification.
const notifyTimeout = time.Second

// notify sends state to the service manager (see sdNotify) and logs a failure: readiness is the
// service manager's business, so a failed notification does not stop reaper.
func notify(log *slog.Logger, state string) {
	if err := sdNotify(state); err != nil {
		log.Warn("service manager notification failed", "error", err)
	}
}
