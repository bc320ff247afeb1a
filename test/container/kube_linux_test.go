package container

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// What podman 4.3 does with deploy/kubernetes's Deployments, as measured here (and why
// TestKubePlay changes them as it does):
//   - It has no native sidecars: an init container with probes is refused ("cannot create an init
//     container that has either of lifecycle, livenessProbe, readinessProbe, or startupProbe set"),
//     and without probes restartPolicy: Always is ignored: the init container must exit before the
//     pod's containers start, so `kube play` waits for reaper serve forever and the agent never
//     starts. The test moves the sidecar into the pod's containers, first: podman starts it beside
//     the agent, which is what a native sidecar is once the pod runs, but neither its start before
//     the agent nor its stop after the agent is played here.
//   - A livenessProbe becomes a healthcheck that runs `curl -f http://localhost:PORT/PATH` in the
//     container (the image needs curl; Debian slim has none) from a systemd timer (none here);
//     readinessProbe and startupProbe do nothing. The test sends the probes' requests itself, as the
//     kubelet does, to the pod's own network namespace.
//   - A Secret in the YAML is stored in a form that env valueFrom.secretKeyRef cannot read back
//     ("not valid JSON"); secretKeyRef reads a podman secret holding a JSON object of base64 values,
//     which the test creates.
//   - A containerPort is published on the host, which a pod in a network namespace of its own
//     (--network none) refuses: the test drops the sidecar's ports once it has read the name of the
//     probes' port.
//   - Pods go under the cgroup /libpod_parent (kube play has no --cgroup-parent).

// kustomizations are deploy/kubernetes's directories that kubectl apply -k takes.
var kustomizations = []string{"base", "overlays/privileged", "overlays/writable-cgroup"}

// TestKubePlay builds each kustomization with kustomize, plays its Deployment with `podman kube
// play` (in a network namespace of its own), and checks what the manifest promises: reaper serves
// MCP on the pod's loopback with the Secret's token, its probes answer as the kubelet asks them,
// the agent's commands run as the pod's user, a session's escapees die when it ends, and on `podman
// pod stop` reaper tears down what is left itself and exits 0; then no cgroup of the pod is left.
func TestKubePlay(t *testing.T) {
	needPods(t)
	leaveNoPodParent(t)
	render := filepath.Join(t.TempDir(), "render")
	build := exec.Command("go", "build", "-o", render, "./render")
	build.Dir = filepath.Join(suite.repo, "deploy", "kubernetes")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building deploy/kubernetes/render (go -C deploy/kubernetes mod download fetches what it needs): %v\n%s", err, out)
	}
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) { kubePlay(t, render, dir) })
	}
}

// leaveNoPodParent removes, once the test is over, the cgroup /libpod_parent that podman makes for
// the pods kube play starts (podman removes the pods' cgroups, not their parent), in each hierarchy
// where it then holds no pod. The test's own pods are gone by then (kubePlay removes them and says
// what it could not), so pods still there are another podman user's, such as another run of these
// tests, whose storage is its own but whose pods share this parent (kube play has no
// --cgroup-parent): the parent is left to that user, who removes it when it is done, and so does
// whichever run ends last. Whether the test made the parent does not matter: two runs may each find
// it made by the other.
func leaveNoPodParent(t *testing.T) {
	t.Cleanup(func() {
		for _, h := range cgroupHierarchies() {
			dir := filepath.Join(h, "libpod_parent")
			err := os.Remove(dir)
			if err == nil || os.IsNotExist(err) {
				continue
			}
			if pods := childCgroups(dir); len(pods) > 0 {
				t.Logf("%s is left: it holds pods of another user of podman (%s)", dir, strings.Join(pods, ", "))
				continue
			}
			t.Errorf("the pods' cgroup parent is left: %v", err)
		}
	})
}

// childCgroups returns the names of the cgroups directly below dir.
func childCgroups(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// kubePlay plays the kustomization dir (see TestKubePlay).
func kubePlay(t *testing.T, render, dir string) {
	pm := suite.pm
	deployment, sidecar := renderDeployment(t, render, dir)
	name := strings.ToLower(testutil.UniqueName("reaper-ktest-"))
	hostDir := t.TempDir()
	os.Chmod(hostDir, 0o777) // reaper and its tasks run as the pod's user
	probes := podmanDeployment(t, deployment, name, hostDir)
	file := filepath.Join(t.TempDir(), "deployment.json")
	b, _ := json.Marshal(deployment)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	mcpToken, adminToken := testutil.UniqueName("mcp-"), testutil.UniqueName("admin-")
	createSecret(t, sidecar.secret, map[string]string{"token": mcpToken, "admin-token": adminToken})

	pod := name + "-pod-0"
	var podID string
	var reaperCtr container // once inspected
	t.Cleanup(func() {
		if _, err := pm.run("pod", "rm", "-f", "-t", "0", "--ignore", pod); err != nil {
			t.Error(err)
		}
		if podID == "" {
			return
		}
		// podman 4.3 leaves a removed pod's own cgroup, empty, in the hierarchies it does not manage
		// (cgroup2 and name=systemd here): what cannot be removed still holds a process.
		if left := removeCgroupTree("/libpod_parent/" + podID); len(left) > 0 {
			t.Errorf("cgroups of pod %s still in use after its removal: %v", pod, left)
		}
		if left := cgroupsNamed(reaperCtr.instances); len(left) > 0 {
			t.Errorf("cgroups of reaper in pod %s left after its removal: %v", pod, left)
		}
	})
	if _, err := pm.run("kube", "play", "--network", "none", file); err != nil {
		t.Fatal(err)
	}
	podID, _ = pm.run("pod", "inspect", "--format", "{{.ID}}", pod)
	s := newSidecar(t, pod+"-reaper", hostDir)
	reaperCtr = s.container
	if s.url != "http://127.0.0.1:8765/mcp" || s.admin != "http://0.0.0.0:9090" {
		t.Errorf("reaper serves MCP at %s and the admin endpoint at %s, want the manifest's 127.0.0.1:8765 and :9090 (every address)", s.url, s.admin)
	}
	netns, err := podNetns(pod)
	if err != nil {
		t.Fatal(err)
	}
	probe := &http.Client{Transport: &http.Transport{DialContext: dialIn(netns)}, Timeout: time.Minute}
	checkProbes(t, probe, probes, s.containment, adminToken)

	hc := &http.Client{Transport: bearer{token: mcpToken, next: probe.Transport}}
	cs := connectHTTPWith(t, s.url, hc, "")
	var id struct {
		Output string `json:"output"`
	}
	callTool(t, cs, "bash", map[string]any{"command": "id -u; id -g"}, &id)
	if strings.Fields(id.Output)[0] != "65532" {
		t.Errorf("the agent's commands run as %q, want the pod's user 65532", id.Output)
	}
	ps := escapees(t, cs, s.container)
	if err := cs.Close(); err != nil { // DELETE
		t.Errorf("closing the client: %v", err)
	}
	s.sessionEnd(t, ps)

	// The pod's end: reaper gets SIGTERM and ends the session still open itself.
	ps = escapees(t, connectHTTPWith(t, s.url, hc, ""), s.container)
	if _, err := pm.run("pod", "stop", "-t", "30", pod); err != nil {
		t.Fatal(err)
	}
	if status, code, err := pm.state(s.name); err != nil || code != 0 {
		t.Errorf("reaper after podman pod stop: %s, exit status %d (%v), want 0\n%s", status, code, err, logs(s.name))
	}
	s.assertTeardown(t)
	testutil.AwaitDead(t, without(ps), within)
}

// sidecarSpec is what the test reads from the manifest's sidecar.
type sidecarSpec struct {
	secret string // the Secret its tokens come from
}

// renderDeployment runs render on the kustomization dir and returns its Deployment, as generic JSON,
// and what its sidecar needs.
func renderDeployment(t *testing.T, render, dir string) (map[string]any, sidecarSpec) {
	t.Helper()
	cmd := exec.Command(render, dir)
	cmd.Dir = filepath.Join(suite.repo, "deploy", "kubernetes")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render %s: %v", dir, err)
	}
	var deployment map[string]any
	for line := range strings.Lines(string(out)) {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("render %s printed %q: %v", dir, line, err)
		}
		if obj["kind"] == "Deployment" {
			deployment = obj
		}
	}
	if deployment == nil {
		t.Fatalf("kustomize build %s made no Deployment", dir)
	}
	var spec sidecarSpec
	for _, c := range list(podSpec(deployment)["initContainers"]) {
		for _, e := range list(c.(map[string]any)["env"]) {
			from, _ := e.(map[string]any)["valueFrom"].(map[string]any)
			ref, _ := from["secretKeyRef"].(map[string]any)
			if name, ok := ref["name"].(string); ok {
				spec.secret = name
			}
		}
	}
	if spec.secret == "" {
		t.Fatalf("%s: the sidecar takes no token from a Secret", dir)
	}
	return deployment, spec
}

// podmanDeployment changes the Deployment d, in place, into what podman 4.3 can play, and nothing
// more (see the notes above): the name, the images (the suite's, the agent a shell that ends on
// SIGTERM), the native sidecar moved to the pod's containers without its ports, and the test's
// directory mounted at shared in it. It returns the sidecar's probes, by kind, as path and port.
func podmanDeployment(t *testing.T, d map[string]any, name, dir string) map[string][2]string {
	t.Helper()
	d["metadata"].(map[string]any)["name"] = name
	spec := podSpec(d)
	inits, containers := list(spec["initContainers"]), list(spec["containers"])
	if len(inits) != 1 || len(containers) != 1 {
		t.Fatalf("want one init container (the sidecar) and one container (the agent): %d, %d", len(inits), len(containers))
	}
	sidecar, agent := inits[0].(map[string]any), containers[0].(map[string]any)
	if sidecar["restartPolicy"] != "Always" {
		t.Fatalf("the sidecar is no native sidecar: restartPolicy %v", sidecar["restartPolicy"])
	}
	delete(sidecar, "restartPolicy")
	delete(spec, "initContainers")
	spec["containers"] = []any{sidecar, agent}
	sidecar["image"] = suite.image
	agent["image"] = suite.base
	agent["command"] = []any{"sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"}
	spec["volumes"] = append(list(spec["volumes"]), map[string]any{"name": "reaper-test", "hostPath": map[string]any{"path": dir, "type": "Directory"}})
	sidecar["volumeMounts"] = append(list(sidecar["volumeMounts"]), map[string]any{"name": "reaper-test", "mountPath": shared})

	ports := map[string]string{}
	for _, p := range list(sidecar["ports"]) {
		p := p.(map[string]any)
		ports[fmt.Sprint(p["name"])] = fmt.Sprint(p["containerPort"])
	}
	delete(sidecar, "ports") // podman publishes them on the host, which needs a bridge network
	probes := map[string][2]string{}
	for _, kind := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		get, _ := sidecar[kind].(map[string]any)["httpGet"].(map[string]any)
		if get == nil {
			t.Fatalf("the sidecar has no httpGet %s", kind)
		}
		port := fmt.Sprint(get["port"])
		if named, ok := ports[port]; ok {
			port = named
		}
		probes[kind] = [2]string{fmt.Sprint(get["path"]), port}
	}
	return probes
}

// podSpec returns the pod template's spec of the Deployment d.
func podSpec(d map[string]any) map[string]any {
	return d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
}

// list returns v as a JSON list, or nil.
func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// createSecret creates the podman secret name in the form env valueFrom.secretKeyRef reads: a JSON
// object of base64 values. Cleanup removes it.
func createSecret(t *testing.T, name string, data map[string]string) {
	t.Helper()
	encoded := map[string]string{}
	for k, v := range data {
		encoded[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	b, _ := json.Marshal(encoded)
	file := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	suite.pm.run("secret", "rm", name) // one a failed run may have left
	if _, err := suite.pm.run("secret", "create", name, file); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { suite.pm.run("secret", "rm", name) })
}

// checkProbes sends the sidecar's probes as the kubelet does, through client (which reaches the
// pod's network namespace): each must answer 200 once reaper is ready, /readyz naming the
// containment; and /metrics, beside them, requires the admin token.
func checkProbes(t *testing.T, client *http.Client, probes map[string][2]string, containment, adminToken string) {
	t.Helper()
	get := func(path, port, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	for kind, p := range probes {
		var code int
		var body string
		testutil.Eventually(t, kind+" "+p[0]+" on port "+p[1]+" to answer 200", func() bool {
			code, body = get(p[0], p[1], "")
			return code == http.StatusOK
		})
		if p[0] == "/readyz" && !strings.Contains(body, "containment "+containment) {
			t.Errorf("%s %s says %q; reaper logged containment %s", kind, p[0], body, containment)
		}
	}
	port := probes["livenessProbe"][1]
	if code, _ := get("/metrics", port, ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the admin token: %d, want 401", code)
	}
	if code, body := get("/metrics", port, adminToken); code != http.StatusOK || !strings.Contains(body, "reaper_sessions_active") {
		t.Errorf("/metrics with the admin token: %d\n%s", code, body)
	}
}

// podNetns returns the path of the network namespace of pod, from its infra container.
func podNetns(pod string) (string, error) {
	out, err := suite.pm.run("pod", "inspect", "--format", "{{.InfraContainerID}}", pod)
	if err != nil {
		return "", err
	}
	out, err = suite.pm.run("inspect", "--format", "{{.State.Pid}}", out)
	if err != nil {
		return "", err
	}
	pid, err := strconv.Atoi(out)
	if err != nil || pid <= 0 {
		return "", fmt.Errorf("the infra container of pod %s runs no process: pid %q", pod, out)
	}
	return fmt.Sprintf("/proc/%d/ns/net", pid), nil
}

// dialIn returns a DialContext that connects from the network namespace at path: each connection's
// socket is made by a goroutine locked to its thread, which joins the namespace and is never
// unlocked, so the thread ends with the goroutine and nothing else ever runs in that namespace.
func dialIn(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			conn net.Conn
			err  error
		}
		done := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				done <- result{err: fmt.Errorf("open %s: %w", path, err)}
				return
			}
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
			if err != nil {
				done <- result{err: fmt.Errorf("setns %s: %w", path, err)}
				return
			}
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			done <- result{conn, err}
		}()
		r := <-done
		return r.conn, r.err
	}
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}
