package safefs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// denyEnv, set to ENOSYS or EPERM, makes the test binary refuse openat2 to itself before it runs
// its tests (see TestWithoutOpenat2).
const denyEnv = "SAFEFS_DENY_OPENAT2"

func TestMain(m *testing.M) {
	if e := os.Getenv(denyEnv); e != "" {
		if err := denyOpenat2(e); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// other is a uid that is neither root nor this process's.
const other = 65534

// within fails the test if fn does not return within a few seconds: nothing here may block.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still blocked after 5 s", what)
	}
}

// victim is a file outside the directory that hostile entries point at; check fails the test if it
// changed.
func victim(t *testing.T) (path string, check func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(path, []byte("secret line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		t.Helper()
		if b, err := os.ReadFile(path); err != nil || string(b) != "secret line\n" {
			t.Errorf("the victim %s changed: %q, %v", path, b, err)
		}
	}
}

// hostile are entries planted where a file of reaper's is expected, each with the error ReadFile must
// give. Entries needing root are made only as root.
var hostile = []struct {
	name string
	make func(t *testing.T, dir, victim string) error
	want error
}{
	{"link to a file", func(t *testing.T, dir, v string) error { return os.Symlink(v, filepath.Join(dir, "f")) }, ErrSymlink},
	{"link to a directory", func(t *testing.T, dir, v string) error { return os.Symlink(filepath.Dir(v), filepath.Join(dir, "f")) }, ErrSymlink},
	{"link to /dev/zero", func(t *testing.T, dir, v string) error { return os.Symlink("/dev/zero", filepath.Join(dir, "f")) }, ErrSymlink},
	{"dangling link", func(t *testing.T, dir, v string) error { return os.Symlink("/nonexistent", filepath.Join(dir, "f")) }, ErrSymlink},
	{"FIFO", func(t *testing.T, dir, v string) error { return unix.Mkfifo(filepath.Join(dir, "f"), 0o600) }, ErrNotRegular},
	{"link to a FIFO", func(t *testing.T, dir, v string) error {
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			return err
		}
		return os.Symlink(fifo, filepath.Join(dir, "f"))
	}, ErrSymlink},
	{"character device", func(t *testing.T, dir, v string) error {
		return unix.Mknod(filepath.Join(dir, "f"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 5))) // /dev/zero's
	}, ErrNotRegular},
	{"socket", func(t *testing.T, dir, v string) error {
		l, err := net.Listen("unix", filepath.Join(dir, "f"))
		if err == nil {
			t.Cleanup(func() { l.Close() })
		}
		return err
	}, ErrNotRegular},
	{"directory", func(t *testing.T, dir, v string) error { return os.Mkdir(filepath.Join(dir, "f"), 0o700) }, ErrNotRegular},
	{"hard link", func(t *testing.T, dir, v string) error { return os.Link(v, filepath.Join(dir, "f")) }, ErrLinked},
	{"another user's file", func(t *testing.T, dir, v string) error {
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
			return err
		}
		return os.Chown(f, other, other)
	}, ErrOwner},
	{"group-writable file", func(t *testing.T, dir, v string) error {
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
			return err
		}
		return os.Chmod(f, 0o620)
	}, ErrWritable},
	{"oversized file", func(t *testing.T, dir, v string) error {
		return os.WriteFile(filepath.Join(dir, "f"), make([]byte, 4097), 0o600)
	}, ErrTooLarge},
}

// TestReadFileRefusesHostileEntries: whatever stands where a file is expected, ReadFile returns at once
// with the cause, and nothing outside is read.
func TestReadFileRefusesHostileEntries(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: the hostile entries (devices, other users' files) need root")
	}
	readHostile(t)
}

func readHostile(t *testing.T) {
	for _, h := range hostile {
		t.Run(h.name, func(t *testing.T) {
			v, check := victim(t)
			d := open(t)
			if err := h.make(t, d.Path(), v); err != nil {
				t.Fatal(err)
			}
			var b []byte
			var err error
			within(t, "ReadFile", func() { b, err = d.ReadFile("f", 4096) })
			if !errors.Is(err, h.want) {
				t.Errorf("ReadFile: %q, %v; want %v", b, err, h.want)
			}
			if err != nil && !strings.Contains(err.Error(), d.Join("f")) {
				t.Errorf("the error does not name the path: %v", err)
			}
			check()
		})
	}
}

// open opens a fresh directory of the test's as a Dir.
func open(t *testing.T) *Dir {
	t.Helper()
	d, err := OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestReadFile(t *testing.T) {
	d := open(t)
	if err := d.WriteFile("f", []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := d.ReadFile("f", 6); err != nil || string(b) != "hello\n" {
		t.Errorf("ReadFile: %q, %v", b, err)
	}
	if b, err := d.ReadFile("f", 5); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile with a cap of 5: %q, %v; want ErrTooLarge", b, err)
	}
	if _, err := d.ReadFile("missing", 10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	for _, name := range []string{"", ".", "..", "a/b", "../f"} {
		if _, err := d.ReadFile(name, 10); err == nil {
			t.Errorf("ReadFile(%q) did not fail", name)
		}
	}
}

// TestCreateFile: CreateFile makes a new file with the mode asked for, and refuses whatever already
// stands at the name (a link to a victim, a FIFO, a file), at once, without writing through it;
// OpenFile reads it back, checked as ReadFile checks.
func TestCreateFile(t *testing.T) {
	d := open(t)
	f, err := d.CreateFile("out", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, err := os.Stat(d.Join("out")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file made: %v, %v", fi, err)
	}
	r, err := d.OpenFile("out", -1)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 10)
	if n, _ := r.ReadAt(b, 0); string(b[:n]) != "hello" {
		t.Errorf("read back %q", b[:n])
	}
	r.Close()
	if _, err := d.OpenFile("out", 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("OpenFile with a cap of 4: %v", err)
	}
	v, check := victim(t)
	os.Symlink(v, d.Join("link"))
	unix.Mkfifo(d.Join("fifo"), 0o600)
	for _, name := range []string{"out", "link", "fifo"} {
		within(t, "CreateFile", func() {
			if f, err := d.CreateFile(name, 0o600); !errors.Is(err, os.ErrExist) {
				t.Errorf("CreateFile over %s: %v, %v", name, f, err)
			}
		})
	}
	within(t, "OpenFile", func() {
		for _, name := range []string{"link", "fifo"} {
			if _, err := d.OpenFile(name, -1); err == nil {
				t.Errorf("OpenFile opened %s", name)
			}
		}
	})
	check()
}

// TestWriteFileReplacesWhatIsThere: WriteFile never writes through what stands at the name (a link to
// a victim, a FIFO): it replaces it, and the victim is unchanged.
func TestWriteFileReplacesWhatIsThere(t *testing.T) {
	for _, h := range hostile {
		if h.want == ErrNotRegular && strings.Contains(h.name, "directory") {
			continue // rename cannot replace a directory: below
		}
		t.Run(h.name, func(t *testing.T) {
			if os.Geteuid() != 0 {
				t.Skip("skipped: needs root")
			}
			v, check := victim(t)
			d := open(t)
			if err := h.make(t, d.Path(), v); err != nil {
				t.Fatal(err)
			}
			within(t, "WriteFile", func() {
				if err := d.WriteFile("f", []byte("new")); err != nil {
					t.Errorf("WriteFile: %v", err)
				}
			})
			if b, err := d.ReadFile("f", 10); err != nil || string(b) != "new" {
				t.Errorf("after WriteFile: %q, %v", b, err)
			}
			check()
		})
	}
	t.Run("directory", func(t *testing.T) {
		d := open(t)
		os.Mkdir(d.Join("f"), 0o700)
		if err := d.WriteFile("f", []byte("new")); err == nil {
			t.Error("WriteFile over a directory did not fail")
		}
		if entries, _ := d.Entries(0); len(entries) != 1 {
			t.Errorf("a temporary file was left: %v", entries)
		}
	})
}

// TestRemoveAll: links are removed, never followed; a tree is removed whole.
func TestRemoveAll(t *testing.T) {
	v, check := victim(t)
	d := open(t)
	root := d.Join("s")
	os.MkdirAll(filepath.Join(root, "a", "b"), 0o700)
	os.WriteFile(filepath.Join(root, "a", "b", "f"), nil, 0o600)
	os.Symlink(filepath.Dir(v), filepath.Join(root, "a", "dirlink"))
	os.Symlink(v, filepath.Join(root, "filelink"))
	unix.Mkfifo(filepath.Join(root, "fifo"), 0o600)
	within(t, "RemoveAll", func() {
		if err := d.RemoveAll("s"); err != nil {
			t.Error(err)
		}
	})
	if _, err := os.Lstat(root); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", root, err)
	}
	check()
	if err := d.RemoveAll("s"); err != nil {
		t.Errorf("removing what is gone: %v", err)
	}
}

// TestOpenRoot: a state directory, or a directory above it, that someone else could change is
// refused, naming it and why; a sticky world-writable ancestor (/tmp) is not.
func TestOpenRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root (other users' directories)")
	}
	base := t.TempDir()
	mk := func(path string, mode os.FileMode, uid int) string {
		t.Helper()
		if err := os.MkdirAll(path, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, mode)
		os.Chown(path, uid, uid)
		return path
	}
	sticky := mk(filepath.Join(base, "sticky"), 0o777|os.ModeSticky, 0)
	open := mk(filepath.Join(base, "open"), 0o777, 0)
	theirs := mk(filepath.Join(base, "theirs"), 0o755, other)
	rootLink := filepath.Join(base, "rootlink")
	os.Symlink(mk(filepath.Join(base, "real"), 0o755, 0), rootLink)
	theirLink := filepath.Join(sticky, "theirlink")
	os.Symlink(filepath.Join(base, "real"), theirLink)
	unix.Fchownat(unix.AT_FDCWD, theirLink, other, other, unix.AT_SYMLINK_NOFOLLOW)
	for _, c := range []struct {
		name, path string
		want       error
	}{
		{"ours", mk(filepath.Join(base, "ours"), 0o700, 0), nil},
		{"ours, readable by all", mk(filepath.Join(base, "ours2"), 0o755, 0), nil},
		{"below a sticky world-writable directory", mk(filepath.Join(sticky, "s"), 0o700, 0), nil},
		{"below a root-owned link", mk(filepath.Join(rootLink, "s"), 0o700, 0), nil},
		{"world-writable", mk(filepath.Join(base, "ww"), 0o777, 0), ErrWritable},
		{"world-writable and sticky", mk(filepath.Join(base, "ws"), 0o777|os.ModeSticky, 0), ErrWritable},
		{"group-writable", mk(filepath.Join(base, "gw"), 0o770, 0), ErrWritable},
		{"another user's", mk(filepath.Join(base, "other"), 0o700, other), ErrOwner},
		{"below a world-writable directory", mk(filepath.Join(open, "s"), 0o700, 0), ErrWritable},
		{"below another user's directory", mk(filepath.Join(theirs, "s"), 0o700, 0), ErrOwner},
		{"a link", rootLink, ErrSymlink},
		{"below another user's link", filepath.Join(theirLink, "s"), ErrSymlink},
		{"a file", func() string { f := filepath.Join(base, "file"); os.WriteFile(f, nil, 0o600); return f }(), ErrNotDir},
		{"missing", filepath.Join(base, "missing"), os.ErrNotExist},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := OpenRoot(c.path)
			if err == nil {
				d.Close()
			}
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("OpenRoot(%s): %v; want %v", c.path, err, c.want)
			}
		})
	}
	made := filepath.Join(sticky, "made")
	d, err := CreateRoot(made)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if fi, err := os.Lstat(made); err != nil || fi.Mode() != os.ModeDir|0o700 {
		t.Errorf("CreateRoot made %v, %v; want a directory of mode 0700", fi.Mode(), err)
	}
	if _, err := CreateRoot(filepath.Join(open, "x")); !errors.Is(err, ErrWritable) {
		t.Errorf("CreateRoot below a world-writable directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(open, "x")); !os.IsNotExist(err) {
		t.Errorf("CreateRoot made a directory below a world-writable one: %v", err)
	}
}

// TestWithoutOpenat2: where openat2 is refused (a kernel before 5.6, a seccomp profile), the
// fallback refuses the same entries.
func TestWithoutOpenat2(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: the hostile entries need root")
	}
	for _, errno := range []string{"ENOSYS", "EPERM"} {
		t.Run(errno, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^(TestReadFileRefusesHostileEntries|TestWriteFileReplacesWhatIsThere|TestRemoveAll|TestOpenRoot)$", "-test.v")
			cmd.Env = append(os.Environ(), denyEnv+"="+errno)
			out, err := cmd.CombinedOutput()
			if err != nil || strings.Count("\n"+string(out), "\n--- PASS: Test") != 4 {
				t.Errorf("the hostile entries under a filter refusing openat2 with %s: %v\n%s", errno, err, out)
			}
		})
	}
}

// denyOpenat2 makes openat2 fail with errno (ENOSYS or EPERM) in this process, and checks that it
// does.
func denyOpenat2(name string) error {
	errno := unix.ENOSYS
	if name == "EPERM" {
		errno = unix.EPERM
	}
	if err := testutil.DenySyscall(unix.SYS_OPENAT2, errno); err != nil {
		return err
	}
	if _, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{}); !errors.Is(err, errno) {
		return fmt.Errorf("openat2 is not refused with %v: %v", errno, err)
	}
	return nil
}

// TestOperatorFiles: a file the operator names is read through its links, but a FIFO or a device
// put in its place is refused at once, and one too large too; a report written where a link stands
// replaces the link and leaves its target alone.
func TestOperatorFiles(t *testing.T) {
	dir := t.TempDir()
	v, check := victim(t)
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("tok\n"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(tokens, link)
	fifo := filepath.Join(dir, "fifo")
	unix.Mkfifo(fifo, 0o600)
	for _, c := range []struct {
		path string
		max  int64
		want error
	}{{tokens, 100, nil}, {link, 100, nil}, {fifo, 100, ErrNotRegular}, {"/dev/zero", 100, ErrNotRegular}, {tokens, 2, ErrTooLarge}, {dir, 100, ErrNotRegular}} {
		var b []byte
		var err error
		within(t, "ReadConfig", func() { b, err = ReadConfig(c.path, c.max) })
		if c.want == nil && (err != nil || string(b) != "tok\n") || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("ReadConfig(%s, %d) = %q, %v; want %v", c.path, c.max, b, err, c.want)
		}
	}
	report := filepath.Join(dir, "report.json")
	os.Symlink(v, report)
	within(t, "ReplaceFile", func() {
		if err := ReplaceFile(report, []byte("{}\n"), 0o644); err != nil {
			t.Error(err)
		}
	})
	check()
	if fi, err := os.Lstat(report); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Errorf("the report: %v, %v", fi.Mode(), err)
	}
	if err := ReplaceFile(filepath.Join(dir, "missing", "r"), nil, 0o644); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a report in a missing directory: %v", err)
	}
}
