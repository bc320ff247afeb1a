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
// of any size costs one buffer.
//
// A process in the middle of execve shows an empty environment: from the switch to its new memory
// until its environment is placed there, and through a file opened before the switch (one orphan in
// six, read just after its parent exited). So an empty environment is read again, through a new file,
// for as long as the process is inside execve (up to maxExecWait) and once more after.
func (w *Walker) scanEnv(pid int, fn func(entry []byte, complete bool) bool, keep int) {
	if len(w.buf) < 64<<10 {
		w.buf = make([]byte, 64<<10)
	}
	deadline := time.Now().Add(maxExecWait)
	for settled := false; ; {
		if !w.streamEnv(pid, "", &envScanner{fn: fn, keep: keep}) || settled {
			return
		}
		tid, inExec := w.emptyEnv(pid)
		if tid != "" {
			w.streamEnv(pid, tid, &envScanner{fn: fn, keep: keep})
			return
		}
		// Empty: believed only when read through a file opened after the process was seen outside
		// execve.
		if !inExec || time.Now().After(deadline) {
			settled = true
			continue
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// streamEnv opens /proc/<pid>/environ, or the environ of pid's thread tid if tid is not empty, and
// feeds it to sc; it reports whether the environment read was empty, in which case sc has seen nothing.
func (w *Walker) streamEnv(pid int, tid string, sc *envScanner) (empty bool) {
	w.path = strconv.AppendInt(append(w.path[:0], "/proc/"...), int64(pid), 10)
	if tid != "" {
		w.path = append(append(w.path, "/task/"...), tid...)
	}
	w.path = append(w.path, "/environ"...)
	fd, err := w.open(unix.AT_FDCWD, string(w.path), unix.O_RDONLY)
	if err != nil {
		return false
	}
	defer w.close(fd)
	read := false
	for {
		n, err := unix.Read(fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false
		}
		if n == 0 {
			if !read {
				return true
			}
			sc.end()
			return false
		}
		read = true
		if !sc.feed(w.buf[:n]) {
			return false
		}
	}
}

// maxExecWait bounds how long scanEnv waits for a process inside execve to show its environment. The
// window between the switch to the new memory and the placing of the environment in it holds no I/O;
// only a process preempted there stays in it for long.
const maxExecWait = 100 * time.Millisecond

// emptyEnv says, from one read of pid's stat, why its environment read empty: tid names a thread of
// pid other than its main thread when the main thread has exited while others live on (see
// Stat.Dead), whose environ shows the process's environment where the main thread's, having
// no memory any more, is empty; inExec reports that pid is inside execve (see statInExec).
func (w *Walker) emptyEnv(pid int) (tid string, inExec bool) {
	b, ok := w.read(pid, "/stat", 0)
	if !ok {
		return "", false
	}
	st, ok := ParseStat(pid, b)
	if !ok {
		return "", false
	}
	if st.State == 'Z' && st.Threads > 1 {
		tids, _ := w.names(unix.AT_FDCWD, "/proc/"+strconv.Itoa(pid)+"/task")
		self := strconv.Itoa(pid)
		for _, tid := range tids {
			if tid != self {
				return tid, false
			}
		}
		return "", false
	}
	return "", statInExec(st, b)
}

// statInExec reports whether the process whose parsed stat is st, and b its contents, is inside
// execve, past the switch to its new memory but before its arguments and environment are placed
// there: its stat shows env_start (field 50) as 0 then, where a process that has run any program
// shows an address, even with an empty environment. A dead process, a kernel thread (no memory of its
// own: its env_start is always 0), and a reader not allowed to see the addresses (who may not read the
// environment either), get false.
func statInExec(st Stat, b []byte) bool {
	if st.Dead() || st.State == 'Z' || st.Flags&pfKthread != 0 {
		return false
	}
	v, ok := statField(b, 50)
	return ok && v == 0
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
