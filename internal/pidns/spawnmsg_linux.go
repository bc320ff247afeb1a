package pidns

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Request is a process for the init to start. The zero values of its flags leave the process in the
// init's process group and session, with the init's user.
type Request struct {
	// Argv is the program (a path: the init does not search PATH) and its arguments.
	Argv []string
	// Env is the process's whole environment.
	Env []string
	// Dir is its working directory; empty means the init's.
	Dir string
	// FDs are its descriptors 0, 1, 2, 3...: descriptors of this process, or -1 for one the child gets
	// closed. They are sent to the init (copies of the same open files: a non-blocking one stays so),
	// which passes them on and closes its copies; the caller keeps and closes its own, and must keep
	// them open until the request has been sent.
	FDs []int
	// Cgroup, if set, is an O_PATH descriptor of the cgroup directory the process is born in (clone3
	// with CLONE_INTO_CGROUP).
	Cgroup *os.File
	// Setpgid puts the process in a process group of its own; Setsid in a session of its own.
	Setpgid, Setsid bool
	// Foreground makes its process group the foreground group of the terminal on its descriptor Ctty
	// (an index into FDs), from the child before it runs anything (see syscall.SysProcAttr); Setctty
	// makes that terminal its controlling terminal (with Setsid). Not both.
	Foreground, Setctty bool
	Ctty                int
	// Credential, if set, is who the process runs as. The init forks such processes from a thread with
	// no_new_privs set, so that they gain no privilege through execve.
	Credential *syscall.Credential
}

// Bits of a spawn's attr.
const (
	attrSetpgid    = 1 << 0
	attrSetsid     = 1 << 1
	attrSetctty    = 1 << 2
	attrForeground = 1 << 3
	attrCgroup     = 1 << 4
	attrCred       = 1 << 5
)

// encodeSpawn checks r and encodes it as request id; the descriptors to send are returned in order.
func encodeSpawn(id uint64, r Request) ([]byte, []int, error) {
	if len(r.Argv) == 0 {
		return nil, nil, errors.New("no program")
	}
	if len(r.FDs) > maxFiles || len(r.Argv) > maxStrings || len(r.Env) > maxStrings {
		return nil, nil, fmt.Errorf("%d descriptors, %d arguments, %d environment entries: over the bounds (%d, %d, %d)",
			len(r.FDs), len(r.Argv), len(r.Env), maxFiles, maxStrings, maxStrings)
	}
	if (r.Foreground || r.Setctty) && (r.Ctty < 0 || r.Ctty >= len(r.FDs) || r.FDs[r.Ctty] < 0) || r.Foreground && r.Setctty {
		return nil, nil, fmt.Errorf("terminal descriptor %d of %d (Foreground %t, Setctty %t)", r.Ctty, len(r.FDs), r.Foreground, r.Setctty)
	}
	if r.Credential != nil && len(r.Credential.Groups) > maxGroups {
		return nil, nil, fmt.Errorf("%d supplementary groups, over %d", len(r.Credential.Groups), maxGroups)
	}
	for _, s := range append(append([]string{r.Dir}, r.Argv...), r.Env...) {
		if strings.IndexByte(s, 0) >= 0 { // execve cannot take it: a NUL byte ends a C string
			return nil, nil, fmt.Errorf("argument %q contains a NUL byte", s)
		}
	}
	var attr uint32
	for bit, on := range map[uint32]bool{attrSetpgid: r.Setpgid, attrSetsid: r.Setsid, attrSetctty: r.Setctty,
		attrForeground: r.Foreground, attrCgroup: r.Cgroup != nil, attrCred: r.Credential != nil} {
		if on {
			attr |= bit
		}
	}
	fds := make([]int, 0, 8)
	open := make([]byte, len(r.FDs)) // 1 where the child gets a descriptor, 0 where it gets none
	for i, fd := range r.FDs {
		if fd >= 0 {
			fds = append(fds, fd)
			open[i] = 1
		}
	}
	if len(fds) > maxSent-1 {
		return nil, nil, fmt.Errorf("%d descriptors to pass, over %d", len(fds), maxSent-1)
	}
	if r.Cgroup != nil {
		fds = append(fds, int(r.Cgroup.Fd()))
	}
	e := new(encoder).U64(id).U32(attr).U32(uint32(r.Ctty)).Str(string(open))
	if c := r.Credential; c != nil {
		e.U32(c.Uid).U32(c.Gid).U32(uint32(len(c.Groups)))
		for _, g := range c.Groups {
			e.U32(g)
		}
	}
	e.Str(r.Dir).Strs(r.Argv).Strs(r.Env)
	if len(e.b) > maxRequest {
		return nil, nil, fmt.Errorf("%d bytes of arguments and environment, over the %d the init accepts", len(e.b), maxRequest)
	}
	return e.b, fds, nil
}

// spawnMsg is a Request as the init receives it, ready for syscall.ForkExec: the descriptors are
// its own (-1 in Attr.Files: closed in the child).
type spawnMsg struct {
	ID   uint64
	Argv []string
	Attr syscall.ProcAttr
}

// decodeSpawn decodes a spawn request and hands it the descriptors that came with it, which must be
// exactly as many as it says. On error the caller still owns (and closes) fds.
func decodeSpawn(payload []byte, fds []int) (spawnMsg, error) {
	d := &decoder{b: payload}
	r := spawnMsg{ID: d.U64("id")}
	attr := d.U32("attr")
	sys := &syscall.SysProcAttr{Setpgid: attr&attrSetpgid != 0, Setsid: attr&attrSetsid != 0,
		Setctty: attr&attrSetctty != 0, Foreground: attr&attrForeground != 0, Ctty: int(d.U32("ctty"))}
	open := d.Str("descriptors")
	if attr&attrCred != 0 {
		sys.Credential = &syscall.Credential{Uid: d.U32("uid"), Gid: d.U32("gid")}
		n := d.U32("group count")
		if n > maxGroups {
			return r, protocolErr("%d groups", n)
		}
		for i := uint32(0); i < n && d.err == nil; i++ {
			sys.Credential.Groups = append(sys.Credential.Groups, d.U32("group"))
		}
	}
	r.Attr = syscall.ProcAttr{Dir: d.Str("dir"), Sys: sys}
	r.Argv = d.Strs("argv")
	r.Attr.Env = d.Strs("env")
	if err := d.End("spawn request"); err != nil {
		return r, err
	}
	want := strings.Count(open, "\x01")
	if attr&attrCgroup != 0 {
		want++
	}
	if len(open) > maxFiles || strings.Count(open, "\x00")+strings.Count(open, "\x01") != len(open) || len(fds) != want {
		return r, protocolErr("spawn request %d with %d descriptors, want %d", r.ID, len(fds), want)
	}
	if len(r.Argv) == 0 {
		return r, protocolErr("spawn request %d without a program", r.ID)
	}
	if (sys.Foreground || sys.Setctty) && (sys.Ctty >= len(open) || open[sys.Ctty] == 0) {
		return r, protocolErr("spawn request %d: terminal descriptor %d of %d", r.ID, sys.Ctty, len(open))
	}
	if sys.Foreground && sys.Setctty {
		return r, protocolErr("spawn request %d: Foreground and Setctty together", r.ID)
	}
	r.Attr.Files = make([]uintptr, len(open))
	for i := range open {
		r.Attr.Files[i] = ^uintptr(0) // -1
		if open[i] == 1 {
			r.Attr.Files[i], fds = uintptr(fds[0]), fds[1:]
		}
	}
	if attr&attrCgroup != 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, fds[0]
	}
	if sys.Foreground {
		sys.Ctty = int(r.Attr.Files[sys.Ctty]) // Go wants the terminal as a descriptor of the parent
	}
	return r, nil
}
