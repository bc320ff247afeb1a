package container

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// suite is what TestMain prepared for every test of the package: podman configured in a temporary
// directory and the image built once from deploy/Containerfile. Tests only read it.
var suite struct {
	// skip, when set, says why the tests cannot run here; every test skips with it.
	skip string
	// err, when set, is a setup failure on a machine where the tests should run; every test fails with it.
	err error
	// pm runs podman with the tests' own configuration.
	pm *podman
	// repo is the repository's root, holding deploy/Containerfile.
	repo string
	// base is the base image made from scratch: busybox-static as the shell and the tools tasks use.
	base string
	// image is deploy/Containerfile's prebuilt target built on base: the binary from the build context.
	image string
	// binary is the static reaper that image holds.
	binary string
	// noPods, when set, says why pods cannot be created here.
	noPods string
}

// installHint says how to get what the tests need.
const installHint = "(.ci/run installs it: apt-get install podman runc catatonit busybox-static)"

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests prepares the suite, runs the tests and removes everything the suite made, returning the
// exit status. A cgroup or mount left behind after the tests fails the run.
func runTests(m *testing.M) int {
	suite.skip = prerequisites()
	if suite.skip != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "reaper-container-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	suite.err = setup(dir)
	fmt.Fprintf(os.Stderr, "container tests: setup took %v\n", time.Since(start).Round(10*time.Millisecond))
	code := m.Run()
	if err := teardown(dir); err != nil {
		fmt.Fprintf(os.Stderr, "container tests: cleanup: %v\n", err)
		code = 1
	}
	return code
}

// prerequisites returns why podman cannot run the tests here, or "".
func prerequisites() string {
	if os.Geteuid() != 0 {
		return "skipped: the container tests run podman as root, and this is uid " + fmt.Sprint(os.Geteuid())
	}
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("skipped: %s is not installed %s", tool, installHint)
		}
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return "skipped: busybox is not installed " + installHint
	}
	if !static(bb) {
		return "skipped: " + bb + " is dynamically linked and cannot be the only program of an image made from scratch " + installHint
	}
	return ""
}

// static reports whether the ELF file at path has no program interpreter, i.e. is statically linked.
func static(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// setup configures podman under dir, builds reaper statically, makes the base image from scratch and
// builds deploy/Containerfile on it. It sets suite.skip when podman cannot run at all here.
func setup(dir string) error {
	repo, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	suite.repo = repo
	pm, err := newPodman(dir)
	if err != nil {
		return err
	}
	suite.pm = pm
	if out, err := pm.run("info", "--format", "{{.Host.OCIRuntime.Name}} {{.Host.CgroupManager}}"); err != nil {
		suite.skip = fmt.Sprintf("skipped: podman cannot run here: %v", err)
		return nil
	} else if out != "runc cgroupfs" {
		return fmt.Errorf("podman ignored its configuration: runtime and cgroup manager are %q", out)
	}
	if _, err := exec.LookPath("catatonit"); err != nil {
		suite.noPods = "skipped: catatonit is not installed, and podman needs it for a pod's infra container " + installHint
	}

	suite.binary = filepath.Join(dir, "context", "bin", "reaper") // where the prebuilt target copies it from
	// The flags of the Containerfile's source stage, so that TestBuildFromSource finds the packages
	// compiled in the build cache.
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-o", suite.binary, "github.com/cgreaper/reaper/cmd/reaper")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building a static reaper: %v\n%s", err, out)
	}
	if !static(suite.binary) {
		return errors.New("CGO_ENABLED=0 gave a dynamically linked reaper")
	}
	tag := strings.ToLower(testutil.UniqueName(""))
	suite.base = "localhost/reaper-test-base:" + tag
	if err := makeBase(pm, filepath.Join(dir, "base"), suite.base); err != nil {
		return err
	}
	suite.image = "localhost/reaper-test:" + tag
	_, err = pm.run("build", "--pull=never", "-f", filepath.Join(repo, "deploy", "Containerfile"),
		"--build-arg", "BASE_IMAGE="+suite.base, "--target", "prebuilt",
		"-t", suite.image, filepath.Join(dir, "context"))
	return err
}

// teardown removes every pod, container and image of the suite, the cgroups podman made for them, and
// dir. It reports what could not be removed.
func teardown(dir string) error {
	var errs []error
	if pm := suite.pm; pm != nil {
		for _, args := range [][]string{{"pod", "rm", "-a", "-f", "-t", "0"}, {"rm", "-a", "-f", "-t", "0"}, {"rmi", "-a", "-f"}} {
			if _, err := pm.run(args...); err != nil {
				errs = append(errs, err)
			}
		}
		if left := removeCgroupTree(pm.cgroupParent); len(left) > 0 {
			errs = append(errs, fmt.Errorf("cgroups left under %s: %v", pm.cgroupParent, left))
		}
	}
	if mounts := mountsUnder(dir); len(mounts) > 0 {
		return errors.Join(append(errs, fmt.Errorf("mounts left under %s, not removing it: %v", dir, mounts))...)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// need skips or fails t unless the suite is ready.
func need(t *testing.T) {
	t.Helper()
	if suite.skip != "" {
		t.Skip(suite.skip)
	}
	if suite.err != nil {
		t.Fatalf("setup: %v", suite.err)
	}
}

// needPods is need, and also skips t where pods cannot be created.
func needPods(t *testing.T) {
	t.Helper()
	need(t)
	if suite.noPods != "" {
		t.Skip(suite.noPods)
	}
}
