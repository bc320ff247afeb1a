package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// Executable returns the path of this program, or /proc/self/exe when that path no longer holds it
// (the binary was replaced on disk by an upgrade): executing /proc/self/exe works even then, but what
// it starts would be listed under the name "exe".
func Executable() string {
	p, err := os.Executable()
	if err != nil {
		return "/proc/self/exe"
	}
	var a, b unix.Stat_t
	if unix.Stat(p, &a) != nil || unix.Stat("/proc/self/exe", &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		return "/proc/self/exe"
	}
	return p
}
