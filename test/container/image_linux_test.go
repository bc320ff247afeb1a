package container

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// TestImageConfig checks how the image is meant to be run: reaper as the entrypoint, `serve` (over
// stdio) as the default command, /workspace as the working directory; reaper's subcommands as the
// container's arguments; and reaper's refusal to serve beyond loopback without authentication holds in the
// image too.
func TestImageConfig(t *testing.T) {
	need(t)
	pm := suite.pm
	out, err := pm.run("image", "inspect", "--format", "{{json .Config.Entrypoint}} {{json .Config.Cmd}} {{.Config.WorkingDir}}", suite.image)
	if err != nil {
		t.Fatal(err)
	}
	if want := `["/usr/local/bin/reaper"] ["serve"] /workspace`; out != want {
		t.Errorf("entrypoint, command, working directory: %s, want %s", out, want)
	}
	out, err = pm.run("run", "--rm", "--pull=never", "--network", "none", "--cgroup-parent", pm.cgroupParent, suite.image, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "reaper ") {
		t.Errorf("reaper version in the image printed %q", out)
	}
	_, err = pm.run("run", "--rm", "--pull=never", "--network", "none", "--cgroup-parent", pm.cgroupParent, suite.image, "serve", "--http", "0.0.0.0:8765", "--insecure-no-auth")
	if err == nil || !strings.Contains(err.Error(), "refusing --insecure-no-auth") || !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("serve --http 0.0.0.0:8765 --insecure-no-auth: %v, want a refusal with exit status 2", err)
	}
}

// TestCopyFromRecipe builds docs/deploy.md's recipe for putting reaper into an agent's own tool image
// (here the test's base image stands for it) and runs reaper from the result.
func TestCopyFromRecipe(t *testing.T) {
	need(t)
	dir := t.TempDir()
	recipe := "FROM " + suite.image + " AS reaper\n" +
		"FROM " + suite.base + "\n" +
		"COPY --from=reaper /usr/local/bin/reaper /usr/local/bin/reaper\n" +
		"ENTRYPOINT [\"/usr/local/bin/reaper\"]\n" +
		"CMD [\"serve\"]\n"
	file := filepath.Join(dir, "Containerfile")
	if err := os.WriteFile(file, []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := "localhost/reaper-test-recipe:" + strings.ToLower(testutil.UniqueName(""))
	buildAndRunVersion(t, tag, "reaper ", "build", "--pull=never", "-f", file, "-t", tag, dir)
}

// prebuiltRecipe is how deploy/Containerfile's comment and docs/deploy.md say to build the image from a
// binary built first, word for word: TestPrebuiltRecipe checks that both still say it, and runs it.
var prebuiltRecipe = []string{
	"CGO_ENABLED=0 go build -trimpath -o bin/reaper ./cmd/reaper",
	"podman build -f deploy/Containerfile --target prebuilt -t reaper .",
}

// TestPrebuiltRecipe runs prebuiltRecipe as a user would, each line through the shell in the root of
// a copy of the repository, and then `reaper version` in the image it tagged. Nothing is changed but
// what no registry here can give: the default BASE_IMAGE, Debian slim, is the suite's base image
// tagged with that name in the suite's own storage, so the recipe's build finds it without a pull.
func TestPrebuiltRecipe(t *testing.T) {
	need(t)
	pm := suite.pm
	for _, doc := range []string{"deploy/Containerfile", "docs/deploy.md"} {
		b, err := os.ReadFile(filepath.Join(suite.repo, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range prebuiltRecipe {
			if !regexp.MustCompile(`(?m)^(#   )?` + regexp.QuoteMeta(line) + `$`).Match(b) {
				t.Errorf("%s no longer gives the line %q: update prebuiltRecipe to what it says", doc, line)
			}
		}
	}
	const debian = "docker.io/library/debian:bookworm-slim"
	if b, _ := os.ReadFile(filepath.Join(suite.repo, "deploy", "Containerfile")); !strings.Contains(string(b), "ARG BASE_IMAGE="+debian+"\n") {
		t.Fatalf("deploy/Containerfile's default BASE_IMAGE is no longer %s: update the test", debian)
	}
	if _, err := pm.run("tag", suite.base, debian); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pm.run("rmi", "-f", debian, "localhost/reaper:latest") })
	checkout := copyRepository(t)
	for _, line := range prebuiltRecipe {
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir, cmd.Env, cmd.WaitDelay = checkout, pm.env, 10*time.Second
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	out, err := pm.run("run", "--rm", "--pull=never", "--network", "none", "--cgroup-parent", pm.cgroupParent, "reaper", "version")
	if err != nil || !strings.HasPrefix(out, "reaper ") {
		t.Errorf("reaper version in the recipe's image: %q, %v", out, err)
	}
}

// copyRepository copies the repository's files, as a checkout has them (no .git, no bin/), into a
// temporary directory and returns it.
func copyRepository(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(suite.repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(suite.repo, path)
		switch {
		case d.IsDir() && (rel == ".git" || rel == "bin"):
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case !d.Type().IsRegular():
			return nil // .git of a worktree is a file; links and the like are no part of a checkout
		case rel == ".git":
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copying the repository: %v", err)
	}
	return dst
}

// TestBuildFromSource builds the image's default target, reaper compiled from source in the GO_IMAGE
// stage. No registry is reachable, so GO_IMAGE is the base image with this machine's Go toolchain,
// module cache and build cache mounted into the build (podman build -v), and GOPROXY=off.
func TestBuildFromSource(t *testing.T) {
	need(t)
	pm := suite.pm
	env := goEnv(t, "GOROOT", "GOMODCACHE", "GOCACHE")
	dir := t.TempDir()
	file := filepath.Join(dir, "Containerfile")
	goImage := "FROM " + suite.base + "\nENV PATH=/go/bin:/usr/local/go/bin:/usr/local/bin:/bin GOPATH=/go HOME=/root\n"
	if err := os.WriteFile(file, []byte(goImage), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := strings.ToLower(testutil.UniqueName(""))
	goTag := "localhost/reaper-test-go:" + tag
	if _, err := pm.run("build", "--pull=never", "-f", file, "-t", goTag, dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pm.run("rmi", "-f", goTag) })
	args := []string{"build", "--pull=never", "--network", "none",
		"-v", env["GOROOT"] + ":/usr/local/go:ro", "-v", env["GOMODCACHE"] + ":/go/pkg/mod:ro"}
	if c := env["GOCACHE"]; c != "" && c != "off" {
		args = append(args, "-v", c+":/root/.cache/go-build")
	}
	image := "localhost/reaper-test-source:" + tag
	args = append(args, "-f", filepath.Join(suite.repo, "deploy", "Containerfile"),
		"--build-arg", "GO_IMAGE="+goTag, "--build-arg", "BASE_IMAGE="+suite.base,
		"--build-arg", "GOPROXY=off", "--build-arg", "VERSION=v0.0.0-container-test",
		"-t", image, suite.repo)
	buildAndRunVersion(t, image, "reaper v0.0.0-container-test", args...)
}

// buildAndRunVersion runs `podman build` with args, which tags image, then `reaper version` in the
// image, and checks that it prints want first. Cleanup removes the image.
func buildAndRunVersion(t *testing.T, image, want string, args ...string) {
	t.Helper()
	pm := suite.pm
	t.Cleanup(func() { pm.run("rmi", "-f", image) })
	if _, err := pm.run(args...); err != nil {
		t.Fatal(err)
	}
	out, err := pm.run("run", "--rm", "--pull=never", "--network", "none", "--cgroup-parent", pm.cgroupParent, image, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, want) {
		t.Errorf("reaper version printed %q, want %q first", out, want)
	}
}

// goEnv returns the go command's settings of names.
func goEnv(t *testing.T, names ...string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"env"}, names...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(names) {
		t.Fatalf("go env %v printed %q", names, out)
	}
	env := map[string]string{}
	for i, n := range names {
		env[n] = lines[i]
	}
	return env
}
