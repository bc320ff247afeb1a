package proc

import (
	"bytes"
	"strconv"
)

// NSPids returns the pid of process pid in each PID namespace it is in, from the namespace of the
// /proc mounted here (this process's, as a rule) inward, from /proc/<pid>/status's NSpid line; nil
// when it cannot be read (the process is gone).
func (w *Walker) NSPids(pid int) []int {
	b, ok := w.read(pid, "/status", 0)
	if !ok {
		return nil
	}
	for line := range bytes.Lines(b) {
		val, found := bytes.CutPrefix(line, []byte("NSpid:"))
		if !found {
			continue
		}
		var out []int
		for _, f := range bytes.Fields(val) {
			n, err := strconv.Atoi(string(f))
			if err != nil {
				return nil
			}
			out = append(out, n)
		}
		return out
	}
	return nil
}
