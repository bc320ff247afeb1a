//go:build linux && !amd64

package proc

// archInputCall adds the calls that only some architectures have; this one has none beyond
// inputCall's.
func archInputCall(nr int64) int { return 0 }
