package pidns

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/tty"
	"golang.org/x/sys/unix"
)

// TestSessionMounts: an init made with an IPC namespace and a private /tmp gives its namespace a
// devpts instance of its own (the terminals the server makes there, and those /dev/ptmx makes
// inside, are on it, not the host's), SysV IPC objects the host does not see, and a /tmp and
// /dev/shm whose files the host does not see.
func TestSessionMounts(t *testing.T) {
	in := startInitWith(t, func(o *Options) { o.IPC, o.PrivateTmp = true, true })
	if in.Devpts() == nil || !in.tmpOK {
		_, note := in.Proc()
		t.Skipf("skipped: the init could not make its mounts here: %s", note)
	}
	name := "pidns-seal-" + strconv.Itoa(os.Getpid())
	task, out := spawnSh(t, in, `ls -A /dev/pts; readlink /proc/self/ns/ipc
id=$(ipcmk -Q | grep -o '[0-9]*$'); ipcs -q | awk -v id="$id" '$2 == id { print $1 }'
echo x > /tmp/`+name+`; echo x > /dev/shm/`+name+`; ls -A /tmp /dev/shm`, nil)
	if code := exitCode(t, task); code != 0 {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("the task exited %d:\n%s", code, b)
	}
	b, _ := os.ReadFile(out.Name())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 3 || lines[0] != "ptmx" {
		t.Fatalf("the task printed %q, want ptmx alone in /dev/pts first", b)
	}
	if own, _ := os.Readlink("/proc/self/ns/ipc"); lines[1] == own {
		t.Errorf("the task's IPC namespace is ours: %s", own)
	}
	if key := lines[2]; !strings.HasPrefix(key, "0x") {
		t.Errorf("the task's message queue has no key: %q", key)
	} else if ipcs, _ := exec.Command("ipcs", "-q").Output(); strings.Contains(string(ipcs), key) {
		t.Errorf("the task's message queue %s is seen outside its namespace:\n%s", key, ipcs)
	}
	if want := "/dev/shm:\n" + name + "\n\n/tmp:\n" + name; !strings.Contains(string(b), "/dev/shm:\n"+name) || !strings.Contains(string(b), "/tmp:\n"+name) {
		t.Errorf("the task's /tmp and /dev/shm hold more or less than its own file (want %q):\n%s", want, b)
	}
	for _, f := range []string{"/tmp/" + name, "/dev/shm/" + name} {
		if _, err := os.Lstat(f); !os.IsNotExist(err) {
			os.Remove(f)
			t.Errorf("the task's %s is on the host: %v", f, err)
		}
	}

	var inst unix.Stat_t
	if err := unix.Fstat(int(in.Devpts().Fd()), &inst); err != nil {
		t.Fatal(err)
	}
	master, slave, id, err := tty.OpenIn(in.Devpts(), tty.Size{Rows: 24, Cols: 80}, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	if id.Target != "/dev/pts/0" {
		t.Errorf("the first terminal of the instance is %s", id.Target)
	}
	// /dev/ptmx inside, reached through the init's root, makes its terminals in the instance too.
	m, err := unix.Open(filepath.Join("/proc", strconv.Itoa(in.Pid()), "root/dev/ptmx"), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(m)
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer unix.Close(int(s))
	var peer unix.Stat_t
	if err := unix.Fstat(int(s), &peer); err != nil || peer.Dev != inst.Dev {
		t.Errorf("/dev/ptmx in the namespace made a terminal on device %d (%v), the instance is %d", peer.Dev, err, inst.Dev)
	}
}
