package systemd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// DefaultTimeout bounds a request when Options.Timeout is zero: connecting, the call and the job.
const DefaultTimeout = 15 * time.Second

// Options says what scope to ask for.
type Options struct {
	Name        string // the unit's name, ending in ".scope"; it must be new
	Description string // the unit's description, as `systemctl status` shows it
	Pids        []int  // the processes to move into the scope, by their pids in this PID namespace
	// RuntimeDir is the user's runtime directory, whose "bus" is where a user manager answers.
	// Empty means /run/user/UID. Not used for root, which asks the system manager.
	RuntimeDir string
	Timeout    time.Duration // bounds the request; zero means DefaultTimeout
}

// Scope is a scope systemd started.
type Scope struct {
	Unit         string // the scope's unit name
	Manager      string // the manager that started it: "system manager" or "user manager"
	ControlGroup string // the scope's cgroup, relative to the cgroup2 mount's top
}

// ErrNoManager is returned (wrapped, with the reason) when no systemd manager answers: systemd is
// not running, the user has no manager or no bus, or the manager does not see this process's pids.
var ErrNoManager = errors.New("no systemd manager answers")

// manager is where a request goes.
type manager struct {
	name string // "system manager" or "user manager"
	path string // its socket
	bus  bool   // a bus (Hello, and the bus daemon tells our pid), not the manager's private socket
}

// managerFor returns the manager this process asks: root the system manager, anyone else their own.
func managerFor(runtimeDir string) manager {
	if os.Geteuid() == 0 {
		return manager{name: "system manager", path: "/run/systemd/private"}
	}
	if runtimeDir == "" {
		runtimeDir = "/run/user/" + strconv.Itoa(os.Geteuid())
	}
	return manager{name: "user manager", path: filepath.Join(runtimeDir, "bus"), bus: true}
}

// Start asks systemd for the transient scope opts.Name with Delegate=yes holding opts.Pids, waits
// until its start job is done, and returns it. The scope goes away by itself once its last process
// has left or died, failed or not. Where no manager answers, the error wraps ErrNoManager and says
// why.
func Start(ctx context.Context, opts Options) (Scope, error) {
	m := managerFor(opts.RuntimeDir)
	sc := Scope{Unit: opts.Name, Manager: m.name}
	if len(opts.Pids) == 0 {
		return sc, errors.New("a scope needs a process to hold")
	}
	timeout := cmp.Or(opts.Timeout, DefaultTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel() // closes the connections (see dial) if Close did not
	conn, err := sd.NewConnection(func() (*dbus.Conn, error) { return m.dial(ctx) })
	if err != nil {
		return sc, fmt.Errorf("systemd's %s at %s: %w: %w", m.name, m.path, ErrNoManager, err)
	}
	defer conn.Close()
	pids := make([]uint32, len(opts.Pids))
	for i, p := range opts.Pids {
		pids[i] = uint32(p)
	}
	props := []sd.Property{
		sd.PropDescription(opts.Description),
		sd.PropPids(pids...),
		{Name: "Delegate", Value: dbus.MakeVariant(true)},
		// A scope that failed (its processes killed by the OOM killer, say) is not kept for
		// `systemctl reset-failed`: nothing of it is left behind.
		{Name: "CollectMode", Value: dbus.MakeVariant("inactive-or-failed")},
	}
	done := make(chan string, 1)
	if _, err := conn.StartTransientUnitContext(ctx, opts.Name, "fail", props, done); err != nil {
		return sc, fmt.Errorf("systemd's %s: start %s: %w", m.name, opts.Name, err)
	}
	select {
	case result := <-done:
		if result != "done" {
			return sc, fmt.Errorf("systemd's %s: starting %s ended %q", m.name, opts.Name, result)
		}
	case <-ctx.Done():
		return sc, fmt.Errorf("systemd's %s: starting %s: no answer within %v: %w", m.name, opts.Name, timeout, ctx.Err())
	}
	p, err := conn.GetUnitTypePropertyContext(ctx, opts.Name, "Scope", "ControlGroup")
	if err != nil {
		return sc, fmt.Errorf("systemd's %s: the cgroup of %s: %w", m.name, opts.Name, err)
	}
	if sc.ControlGroup, _ = p.Value.Value().(string); sc.ControlGroup == "" {
		return sc, fmt.Errorf("systemd's %s: %s has no cgroup", m.name, opts.Name)
	}
	return sc, nil
}

// dial connects to the manager and authenticates as this process's user; ctx bounds the
// connection's life. It refuses a manager that would take this process's pids for other processes:
// on the private socket the peer must be PID 1 of this PID namespace (as the system manager is), on
// a bus the bus daemon must see this process under its own pid.
func (m manager) dial(ctx context.Context) (*dbus.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", m.path)
	if err != nil {
		return nil, err
	}
	uc := nc.(*net.UnixConn)
	if !m.bus {
		if pid, err := peerPid(uc); err != nil || pid != 1 {
			uc.Close()
			return nil, fmt.Errorf("the peer on %s is not PID 1 of this PID namespace (pid %d, %v)", m.path, pid, err)
		}
	}
	conn, err := dbus.DialUnix(uc, dbus.WithContext(ctx))
	if err != nil {
		uc.Close()
		return nil, err
	}
	err = conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Geteuid()))})
	if err == nil && m.bus {
		err = conn.Hello()
	}
	var pid uint32
	if err == nil && m.bus {
		err = conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetConnectionUnixProcessID", 0, conn.Names()[0]).Store(&pid)
		if err == nil && int(pid) != os.Getpid() {
			err = fmt.Errorf("the bus at %s sees this process (pid %d) as pid %d: another PID namespace's", m.path, os.Getpid(), pid)
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// peerPid returns the pid of the process at the other end of c, as this PID namespace sees it (0
// where it cannot).
func peerPid(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) { cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return int(cred.Pid), nil
}
