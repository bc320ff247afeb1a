package pidns

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Mode is how this process can give sessions PID namespaces, as Probe found it.
type Mode struct {
	// UserNS: only through a user namespace of their own (see Options.UserNS).
	UserNS bool
	// Proc reports whether the init could mount a /proc of its namespace; Devpts a devpts instance
	// of its own on /dev/pts; PrivateTmp (where asked) a tmpfs on /tmp and /dev/shm. Note says why
	// one could not.
	Proc, Devpts, PrivateTmp bool
	Note                     string
}

// Probe starts an init as Start would (opts.UserNS and opts.Cgroup are ignored) and ends it again, to
// learn whether PID namespaces can be made here and how: first directly (root, or CAP_SYS_ADMIN), and
// where that is refused, through an unprivileged user namespace, unless opts.NoUserNS. The error says
// why neither works: refused without CAP_SYS_ADMIN (EPERM), by a seccomp profile such as container
// runtimes' default one (EPERM or ENOSYS), or user namespaces disabled (ENOSPC when
// user.max_user_namespaces is 0, EPERM where the distribution restricts them).
func Probe(opts Options) (Mode, error) {
	opts.Cgroup = nil
	opts.UserNS = false
	in, direct := Start(opts)
	err := direct
	if direct != nil && !opts.NoUserNS {
		opts.UserNS = true
		in, err = Start(opts)
	}
	switch {
	case err == nil:
		proc, note := in.Proc()
		m := Mode{UserNS: opts.UserNS, Proc: proc, Devpts: in.Devpts() != nil, PrivateTmp: in.tmpOK, Note: note}
		in.end()
		return m, nil
	case opts.NoUserNS:
		return Mode{}, fmt.Errorf("creating PID and mount namespaces: %w; not through a user namespace, which would not map the tasks' user", cause(direct))
	}
	return Mode{}, fmt.Errorf("creating PID and mount namespaces: %w; through a user namespace: %w", cause(direct), cause(err))
}

// end kills the init and closes it once it is gone, waiting for that at most its timeout.
func (in *Init) end() {
	in.Kill()
	in.Wait(context.Background(), time.Now().Add(in.timeout))
	in.Close()
}

// cause is what is worth saying of a failed Start: its innermost error.
func cause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
