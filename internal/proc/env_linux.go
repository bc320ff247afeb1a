package proc

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// maxValue bounds the value Env returns: markers are short, and an environment is not trusted.
const maxValue = 4096

// Marked reports whether any entry of pid's environment is exactly marker ("KEY=value"), wherever it
// sits and however large the environment is. Any entry, not only the first with that key: a process
// can add entries but not remove the ones its parent gave it without calling execve, and a process that
// carries a scope's marker anywhere is taken to belong to that scope (ending it early harms nobody but
// itself).
func (w *Walker) Marked(pid int, marker string) bool {
	found := false
	w.scanEnv(pid, func(entry []byte, complete bool) bool {
		if complete && string(entry) == marker {
			found = true
			return false
		}
		return true
	}, len(marker))
	return found
}

// Env returns the value of the first entry named key in pid's environment, at most 4 KiB of it.
func (w *Walker) Env(pid int, key string) (string, bool) {
	var val string
	found := false
	prefix := len(key) + 1
	w.scanEnv(pid, func(entry []byte, _ bool) bool {
		if len(entry) >= prefix && entry[len(key)] == '=' && string(entry[:len(key)]) == key {
			val, found = string(entry[prefix:]), true
			return false
		}
		return true
	}, prefix+maxValue)
	return val, found
}

// scanEnv streams /proc/<pid>/environ and calls fn with each entry, cut to its first keep bytes
// (complete is false when it was cut), until fn returns false. It reads in chunks, so an environment
// of any size costs one buffer. A process in the middle of execve may show an empty environment for
// an instant; an empty one is read again a few times before it is believed.
func (w *Walker) scanEnv(pid int, fn func(entry []byte, complete bool) bool, keep int) {
	w.path = append(strconv.AppendInt(append(w.path[:0], "/proc/"...), int64(pid), 10), "/environ"...)
	fd, err := unix.Open(string(w.path), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if len(w.buf) < 64<<10 {
		w.buf = make([]byte, 64<<10)
	}
	sc := envScanner{fn: fn, keep: keep}
	any := false
	for try := 0; ; {
		n, err := unix.Read(fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if n == 0 {
			if !any && try < 3 {
				try++
				time.Sleep(50 * time.Microsecond)
				if _, err := unix.Seek(fd, 0, 0); err != nil {
					return
				}
				continue
			}
			sc.end()
			return
		}
		any = true
		if !sc.feed(w.buf[:n]) {
			return
		}
	}
}

// envScanner splits an environment (NUL-separated entries) that arrives in chunks, and calls fn with
// each entry, cut to its first keep bytes (complete is false when it was cut), until fn returns false.
type envScanner struct {
	fn      func(entry []byte, complete bool) bool
	keep    int
	entry   []byte // the current entry's first bytes, when it spans chunks
	cut     bool   // the current entry is longer than keep
	pending bool   // bytes of an entry have been seen since the last NUL
}

// feed scans one chunk; it returns false once fn has returned false.
func (sc *envScanner) feed(b []byte) bool {
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if room := sc.keep - len(sc.entry); room > 0 {
			if len(part) > room {
				sc.entry = append(sc.entry, part[:room]...)
				sc.cut = true
			} else {
				sc.entry = append(sc.entry, part...)
			}
		} else if len(part) > 0 {
			sc.cut = true
		}
		if i < 0 {
			sc.pending = true
			return true // the entry goes on in the next chunk
		}
		if !sc.fn(sc.entry, !sc.cut) {
			return false
		}
		sc.entry, sc.cut, sc.pending = sc.entry[:0], false, false
		b = b[i+1:]
	}
	return true
}

// end reports the last entry, when the environment does not end with a NUL.
func (sc *envScanner) end() {
	if sc.pending {
		sc.fn(sc.entry, !sc.cut)
	}
}

// EachEnv calls fn with each entry of pid's environment ("KEY=value", at most 4 KiB of it: longer
// entries are cut) until fn returns false. fn must not keep entry.
func (w *Walker) EachEnv(pid int, fn func(entry []byte) bool) {
	w.scanEnv(pid, func(entry []byte, _ bool) bool { return fn(entry) }, maxValue)
}
