package testutil

import (
	"crypto/rand"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"
)

// TestUser is an unprivileged account a test made.
type TestUser struct {
	Name     string
	Uid, Gid int
	Home     string
}

// User creates an unprivileged user (with its own group and a home directory) for the test and
// removes both at cleanup, even when the test fails: register it before whatever runs processes as
// that user, so that those are stopped first. It skips the test where users cannot be made (not root,
// no useradd).
func User(t testing.TB) TestUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: creating a user for the test needs root")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("skipped: creating a user for the test needs useradd (Debian's package: passwd)")
	}
	name := "rt" + strings.ToLower(rand.Text()[:10])
	home := "/home/" + name
	if out, err := exec.Command("useradd", "--create-home", "--home-dir", home, "--user-group", "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", "--force", "--remove", name).CombinedOutput(); err != nil {
			t.Errorf("cleanup: userdel %s: %v\n%s", name, err, out)
		}
		exec.Command("groupdel", name).Run() // gone with the user where USERGROUPS_ENAB is set
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return TestUser{Name: name, Uid: uid, Gid: gid, Home: home}
}
