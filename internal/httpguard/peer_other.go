//go:build !linux

package httpguard

import (
	"errors"
	"net/netip"
)

// loopbackUID is Linux's alone: elsewhere a loopback peer is known by its address.
func loopbackUID(netip.AddrPort, netip.AddrPort) (uint32, error) {
	return 0, errors.New("the uid of a peer is known on Linux only")
}
