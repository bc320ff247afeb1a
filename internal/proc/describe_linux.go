package proc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/procfs"
)

// Proc describes a process for reports: what outlived a kill, what a job left behind.
type Proc struct {
	Pid int
	// Comm is the command name (at most 15 bytes, from /proc/<pid>/stat).
	Comm string
	// State is as in /proc/<pid>/stat: "D" is uninterruptible sleep, "T" stopped, "Z" zombie; "?" when
	// the process was already gone.
	State string
	// Age is how long the process had been running when it was described.
	Age time.Duration
	// SessionPid, if set, is the pid the process has where its session's commands run (a PID
	// namespace of the session's: what $! printed there, and what kill takes there); Pid is then
	// the pid it has here.
	SessionPid int
}

func (p Proc) String() string { return fmt.Sprintf("%d(%s,%s)", p.Pid, p.Comm, p.State) }

// MarshalJSON writes {"pid": 812, "command": "sleep", "state": "S", "age_seconds": 41.2}; with a
// SessionPid, "pid" is that one and "host_pid" the pid here.
func (p Proc) MarshalJSON() ([]byte, error) {
	pid, host := p.Pid, 0
	if p.SessionPid > 0 {
		pid, host = p.SessionPid, p.Pid
	}
	return json.Marshal(struct {
		Pid     int     `json:"pid"`
		HostPid int     `json:"host_pid,omitempty"`
		Command string  `json:"command"`
		State   string  `json:"state"`
		Age     float64 `json:"age_seconds"`
	}{pid, host, p.Comm, p.State, p.Age.Round(time.Millisecond).Seconds()})
}

// clockTicks is USER_HZ, the unit of start times in /proc/<pid>/stat: 100 on every architecture Linux
// supports in its user ABI.
const clockTicks = 100

// Describe reads a process's command name, state and age.
func Describe(pid int) Proc {
	p := Proc{Pid: pid, State: "?"}
	b, ok := ReadAt(-1, "/proc/"+strconv.Itoa(pid)+"/stat", make([]byte, 4096))
	if !ok {
		return p
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	st, ok := ParseStat(pid, b)
	if !ok || open < 0 || end < open {
		return p
	}
	p.Comm, p.State = string(b[open+1:end]), string(st.State)
	if up, ok := uptime(); ok {
		p.Age = max(0, up-time.Duration(st.Start)*time.Second/clockTicks)
	}
	return p
}

// uptime returns the time since boot from /proc/uptime.
func uptime() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, false
	}
	secs, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}

// maxCmdline bounds the command line CommandLine returns.
const maxCmdline = 512

// CommandLine returns pid's command line, its arguments joined by spaces and cut to 512 bytes; the
// command name in brackets for a kernel thread or a zombie, whose command line is empty; "" when the
// process is gone. It reads no more than that of it: a process's arguments are as long as it made
// them.
func CommandLine(pid int) string {
	b, ok := ReadAt(-1, "/proc/"+strconv.Itoa(pid)+"/cmdline", make([]byte, maxCmdline+1))
	if !ok {
		return ""
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		if p := Describe(pid); p.Comm != "" {
			return "[" + p.Comm + "]"
		}
		return ""
	}
	if len(b) > maxCmdline {
		b = append(b[:maxCmdline-3], "..."...)
	}
	return string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
}

// Cgroup returns pid's cgroup v2 path as /proc/<pid>/cgroup shows it (relative to the reader's
// cgroup namespace); "" when the process is gone or has none.
func Cgroup(pid int) string {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ""
	}
	cgs, err := p.Cgroups()
	if err != nil {
		return ""
	}
	for _, c := range cgs {
		if c.HierarchyID == 0 { // the v2 hierarchy's line, "0::<path>"
			return c.Path
		}
	}
	return ""
}
