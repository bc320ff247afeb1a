//go:build linux && !amd64

package smallinit

// image is empty: there is no small init for this architecture (see the package documentation).
var image []byte
