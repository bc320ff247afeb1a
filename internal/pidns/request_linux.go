package pidns

import (
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
	// them open until Spawn returns.
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

// spawnRequest is a Request as the init receives it: the descriptors are its own.
type spawnRequest struct {
	id                           uint64
	argv, env                    []string
	dir                          string
	files                        []int // -1: closed in the child
	cgroup                       int   // -1: none
	setpgid, setsid, fg, setctty bool
	ctty                         int
	cred                         *syscall.Credential
}

// encodeSpawn checks r and encodes it; the descriptors to send are returned in order.
func encodeSpawn(id uint64, r Request) ([]byte, []int, error) {
	if len(r.Argv) == 0 {
		return nil, nil, fmt.Errorf("no program")
	}
	if len(r.FDs) > maxFiles || len(r.Argv) > maxStrings || len(r.Env) > maxStrings {
		return nil, nil, fmt.Errorf("%d descriptors, %d arguments, %d environment entries: over the bounds (%d, %d, %d)",
			len(r.FDs), len(r.Argv), len(r.Env), maxFiles, maxStrings, maxStrings)
	}
	if (r.Foreground || r.Setctty) && (r.Ctty < 0 || r.Ctty >= len(r.FDs) || r.FDs[r.Ctty] < 0) || r.Foreground && r.Setctty {
		return nil, nil, fmt.Errorf("terminal descriptor %d of %d (Foreground %v, Setctty %v)", r.Ctty, len(r.FDs), r.Foreground, r.Setctty)
	}
	if r.Credential != nil && len(r.Credential.Groups) > maxGroups {
		return nil, nil, fmt.Errorf("%d supplementary groups, over %d", len(r.Credential.Groups), maxGroups)
	}
	for _, s := range append(append([]string{r.Dir}, r.Argv...), r.Env...) {
		if err := checkString("argument", s); err != nil {
			return nil, nil, err
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
	var e encoder
	e.u64(id)
	e.u32(attr)
	e.u32(uint32(r.Ctty))
	e.str(string(open))
	if c := r.Credential; c != nil {
		e.u32(c.Uid)
		e.u32(c.Gid)
		e.u32(uint32(len(c.Groups)))
		for _, g := range c.Groups {
			e.u32(g)
		}
	}
	e.str(r.Dir)
	e.strs(r.Argv)
	e.strs(r.Env)
	if len(e.b) > maxRequest {
		return nil, nil, fmt.Errorf("%d bytes of arguments and environment, over the %d the init accepts", len(e.b), maxRequest)
	}
	return e.b, fds, nil
}

// decodeSpawn decodes a spawn request and hands it the descriptors that came with it, which must be
// exactly as many as it says. On error the caller still owns (and closes) fds.
func decodeSpawn(payload []byte, fds []int) (spawnRequest, error) {
	d := decoder{b: payload}
	r := spawnRequest{id: d.u64("id"), cgroup: -1}
	attr := d.u32("attr")
	r.ctty = int(d.u32("ctty"))
	open := d.str("descriptors")
	if attr&attrCred != 0 {
		r.cred = &syscall.Credential{Uid: d.u32("uid"), Gid: d.u32("gid")}
		n := d.u32("group count")
		if n > maxGroups {
			return r, protocolError("%d groups", n)
		}
		for i := uint32(0); i < n && d.err == nil; i++ {
			r.cred.Groups = append(r.cred.Groups, d.u32("group"))
		}
	}
	r.dir = d.str("dir")
	r.argv = d.strs("argv")
	r.env = d.strs("env")
	if err := d.end("spawn request"); err != nil {
		return r, err
	}
	want := strings.Count(open, "\x01")
	if attr&attrCgroup != 0 {
		want++
	}
	if len(open) > maxFiles || strings.Count(open, "\x00")+strings.Count(open, "\x01") != len(open) || len(fds) != want {
		return r, protocolError("spawn request %d with %d descriptors, want %d", r.id, len(fds), want)
	}
	if len(r.argv) == 0 {
		return r, protocolError("spawn request %d without a program", r.id)
	}
	if (attr&attrForeground != 0 || attr&attrSetctty != 0) && (r.ctty >= len(open) || open[r.ctty] == 0) {
		return r, protocolError("spawn request %d: terminal descriptor %d of %d", r.id, r.ctty, len(open))
	}
	if attr&attrForeground != 0 && attr&attrSetctty != 0 {
		return r, protocolError("spawn request %d: Foreground and Setctty together", r.id)
	}
	r.files = make([]int, len(open))
	next := 0
	for i := range open {
		r.files[i] = -1
		if open[i] == 1 {
			r.files[i] = fds[next]
			next++
		}
	}
	if attr&attrCgroup != 0 {
		r.cgroup = fds[next]
	}
	r.setpgid, r.setsid = attr&attrSetpgid != 0, attr&attrSetsid != 0
	r.fg, r.setctty = attr&attrForeground != 0, attr&attrSetctty != 0
	return r, nil
}
