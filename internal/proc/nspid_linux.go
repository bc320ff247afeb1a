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
	val, _ := lineValue(b, "NSpid")
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
