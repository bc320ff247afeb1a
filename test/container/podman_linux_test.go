package container

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// podman runs podman with a configuration of its own: files in a directory of the test, named by
// CONTAINERS_CONF and CONTAINERS_STORAGE_CONF, so that the machine's podman setup is neither read nor
// changed. (runc keeps its per-container state under /run/runc while a container exists; podman
// offers no setting for that.)
type podman struct {
	dir string   // configuration, image storage and podman's runtime files
	env []string // this process's environment with the two configuration variables
	// cgroupParent is where podman creates every container's and pod's cgroups, in every hierarchy:
	// unique to this run, so that what is left there is this run's.
	cgroupParent string
}

// containersConf is podman's configuration for the tests. Each setting is there because podman's
// default fails or changes the machine on hosts like ours:
//   - runc: crun 1.8 refuses hybrid cgroup hosts ("cgroups in hybrid mode not supported").
//   - default_ulimits at or below this process's hard limits: podman's own defaults raise them, which
//     needs CAP_SYS_RESOURCE (root here lacks it). nproc also stays at or below 32768: podman starts
//     conmon, the containers' monitor, with that limit here, and runc cannot raise it (EPERM).
//   - cgroupfs: no systemd here; events to a file under tmp_dir (no journald).
//   - lock_type "file": the locks of containers and pods as files under tmp_dir. podman's default
//     is one shared-memory segment for every rootful podman on the machine (/dev/shm/libpod_lock),
//     whatever its storage: another user's `podman system renumber` frees every lock in it, and a
//     podman configured with another num_locks cannot open it (ERANGE). Files under tmp_dir are the
//     suite's alone.
//   - tmp_dir, volume_path, network_config_dir: podman's state of containers and networks in the
//     test's directory. static_dir (the container database) is left at its default, below graphroot:
//     the cleanup process podman starts when a container exits is told the graphroot but not
//     static_dir, and one that looks elsewhere leaves `podman run` waiting 20 s for every exit.
const containersConf = `[containers]
default_ulimits = ["nofile=%[2]d:%[2]d", "nproc=%[3]d:%[3]d"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
lock_type = "file"
tmp_dir = "%[1]s/tmp"
volume_path = "%[1]s/volumes"

[network]
network_config_dir = "%[1]s/networks"
`

const storageConf = `[storage]
driver = "overlay"
graphroot = "%[1]s/storage"
runroot = "%[1]s/run"
`

// newPodman writes podman's configuration into dir.
func newPodman(dir string) (*podman, error) {
	nofile, err := hardLimit(unix.RLIMIT_NOFILE, 1<<16)
	if err != nil {
		return nil, err
	}
	nproc, err := hardLimit(unix.RLIMIT_NPROC, 32768)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "containers.conf")
	storage := filepath.Join(dir, "storage.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, containersConf, dir, nofile, nproc), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(storage, fmt.Appendf(nil, storageConf, dir), 0o644); err != nil {
		return nil, err
	}
	return &podman{
		dir:          dir,
		env:          append(os.Environ(), "CONTAINERS_CONF="+conf, "CONTAINERS_STORAGE_CONF="+storage),
		cgroupParent: "/" + testutil.UniqueName("reaper-ctest-"),
	}, nil
}

// hardLimit returns this process's hard limit of resource, or most if that is lower.
func hardLimit(resource int, most uint64) (uint64, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(resource, &rl); err != nil {
		return 0, fmt.Errorf("getrlimit %d: %w", resource, err)
	}
	return min(rl.Max, most), nil
}

// commandTimeout bounds every podman command the tests run to its end; builds included.
const commandTimeout = 3 * time.Minute

// command returns podman with args and the tests' configuration. Its context ends it after
// commandTimeout.
func (p *podman) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = p.env
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs podman with args to its end and returns its standard output without the surrounding
// white space; the error carries the command and its standard error.
func (p *podman) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := p.command(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("podman %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}

// busyboxApplets are the programs of the base image: a shell, what the tests' tasks run, and wget for
// a client container.
var busyboxApplets = []string{"sh", "cat", "echo", "env", "kill", "ls", "mkdir", "ps", "setsid", "sleep", "true", "wc", "wget"}

// nohupScript stands in for nohup, which Debian's busybox-static lacks: like nohup with its output not
// on a terminal, it ignores SIGHUP and runs the command.
const nohupScript = "#!/bin/sh\ntrap '' HUP\nexec \"$@\"\n"

// makeBase builds the base image tag from scratch in dir: busybox-static as /bin/sh and the tools the
// tests' tasks use, no C library, no package manager.
func makeBase(p *podman, dir, tag string) error {
	root := filepath.Join(dir, "root")
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return err
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return err
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bin, "busybox"), data, 0o755); err != nil {
		return err
	}
	for _, applet := range busyboxApplets {
		if err := os.Symlink("busybox", filepath.Join(bin, applet)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "nohup"), []byte(nohupScript), 0o755); err != nil {
		return err
	}
	file := filepath.Join(dir, "Containerfile")
	recipe := "FROM scratch\nCOPY root/ /\nENV PATH=/usr/local/bin:/bin\n"
	if err := os.WriteFile(file, []byte(recipe), 0o644); err != nil {
		return err
	}
	_, err = p.run("build", "--pull=never", "-f", file, "-t", tag, dir)
	return err
}

// container is a container seen from the host.
type container struct {
	name  string
	id    string
	pid   int    // the host pid of its first process: reaper
	pidNS string // its pid namespace, as /proc/<pid>/ns/pid reads
	// dir is the test's directory mounted at shared in the container.
	dir string
	// instances are the names reaper gives the cgroup directory of an instance, r<pid>-<start time>
	// (README), for each process of the container when it was inspected: where a reaper made its
	// slices, whatever it took for its own cgroup, a directory of one of these names is.
	instances []string
}

// inspect returns the running container name.
func (p *podman) inspect(name string) (container, error) {
	out, err := p.run("inspect", "--format", "{{.Id}} {{.State.Pid}}", name)
	if err != nil {
		return container{}, err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return container{}, fmt.Errorf("podman inspect %s printed %q", name, out)
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 0 {
		return container{}, fmt.Errorf("container %s is not running: pid %q", name, f[1])
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return container{}, err
	}
	c := container{name: name, id: f[0], pid: pid, pidNS: ns}
	for nspid, p := range c.procs() {
		c.instances = append(c.instances, fmt.Sprintf("r%d-%d", nspid, p.Start))
	}
	return c, nil
}

// sigtermRecorded reports whether the records-sigterm escapee got SIGTERM (see escapeScript).
func (c container) sigtermRecorded() bool {
	b, _ := os.ReadFile(filepath.Join(c.dir, filepath.Base(sigtermFile)))
	return strings.Contains(string(b), "records-sigterm")
}

// state returns the container's status and exit code as podman reports them.
func (p *podman) state(name string) (status string, exitCode int, err error) {
	out, err := p.run("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name)
	if err != nil {
		return "", 0, err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return "", 0, fmt.Errorf("podman inspect %s printed %q", name, out)
	}
	code, err := strconv.Atoi(f[1])
	return f[0], code, err
}
