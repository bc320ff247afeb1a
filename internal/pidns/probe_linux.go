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
	// Proc reports whether the init could mount a /proc of its namespace; Note says why not.
	Proc bool
	Note string
}

// Probe starts an init as Start would (opts.UserNS and opts.Cgroup are ignored) and ends it again, to
// learn whether PID namespaces can be made here and how: first directly (root, or CAP_SYS_ADMIN), and
// where that is refused, through an unprivileged user namespace. The error says why neither works:
// refused without CAP_SYS_ADMIN (EPERM), by a seccomp profile such as container runtimes' default one
// (EPERM or ENOSYS), or user namespaces disabled (ENOSPC when user.max_user_namespaces is 0, EPERM
// where the distribution restricts them).
func Probe(opts Options) (Mode, error) {
	opts.Cgroup = nil
	opts.UserNS = false
	m, direct := try(opts)
	if direct == nil {
		return m, nil
	}
	opts.UserNS = true
	m, err := try(opts)
	if err == nil {
		return m, nil
	}
	return Mode{}, fmt.Errorf("creating PID and mount namespaces: %w; through a user namespace: %w", cause(direct), cause(err))
}

// try starts an init and ends it, waiting for it to be gone.
func try(opts Options) (Mode, error) {
	in, err := Start(opts)
	if err != nil {
		return Mode{}, err
	}
	in.Kill()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	in.Wait(context.Background(), time.Now().Add(timeout))
	in.Close()
	proc, note := in.Proc()
	return Mode{UserNS: opts.UserNS, Proc: proc, Note: note}, nil
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
