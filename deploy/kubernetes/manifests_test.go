package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kinds maps the apiVersion and kind of every object the manifests may hold to its API type. An
// object of another kind fails the test: add its type here.
var kinds = map[string]func() any{
	"apps/v1/Deployment":          func() any { return new(appsv1.Deployment) },
	"v1/Pod":                      func() any { return new(corev1.Pod) },
	"v1/Secret":                   func() any { return new(corev1.Secret) },
	"node.k8s.io/v1/RuntimeClass": func() any { return new(nodev1.RuntimeClass) },
}

// kustomizations are the directories users apply with kubectl apply -k.
var kustomizations = []string{"base", "overlays/privileged", "overlays/writable-cgroup"}

// documents splits a multi-document YAML file.
func documents(data []byte) [][]byte {
	var docs [][]byte
	for _, doc := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(data), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) != "" {
			docs = append(docs, []byte(doc))
		}
	}
	return docs
}

// strict decodes one YAML document into v as the API server's strict decoding does: duplicate
// keys, fields v's type does not have, and fields spelt in another case are errors.
func strict(doc []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// decodeObject decodes one document strictly into the API type its apiVersion and kind name:
// unknown or misspelt fields and duplicate keys fail.
func decodeObject(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	newObj := kinds[tm.APIVersion+"/"+tm.Kind]
	if newObj == nil {
		return nil, fmt.Errorf("apiVersion %q kind %q: not a type this test knows", tm.APIVersion, tm.Kind)
	}
	obj := newObj()
	if err := strict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

// jsonPatch is an RFC 6902 patch operation, as kustomize's patches hold them.
type jsonPatch struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from,omitempty"`
	Value any    `json:"value,omitempty"`
}

// TestManifestsDecodeStrictly decodes every YAML file here strictly: Kubernetes objects into their
// API types, kustomizations into kustomize's type (and the files they name must exist), JSON patches
// into RFC 6902 operations.
func TestManifestsDecodeStrictly(t *testing.T) {
	var files []string
	filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	})
	if len(files) < 7 {
		t.Fatalf("found only %d manifests: %v", len(files), files)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		docs := documents(data)
		if len(docs) == 0 {
			t.Errorf("%s: no document", file)
		}
		for i, doc := range docs {
			where := fmt.Sprintf("%s, document %d", file, i+1)
			switch {
			case filepath.Base(file) == "kustomization.yaml":
				for _, err := range checkKustomization(filepath.Dir(file), doc) {
					t.Errorf("%s: %v", where, err)
				}
			case bytes.HasPrefix(bytes.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*\n`).ReplaceAll(doc, nil)), []byte("- op:")):
				var ops []jsonPatch
				if err := strict(doc, &ops); err != nil {
					t.Errorf("%s: %v", where, err)
				}
				for _, op := range ops {
					if !slices.Contains([]string{"add", "remove", "replace", "move", "copy", "test"}, op.Op) || !strings.HasPrefix(op.Path, "/") {
						t.Errorf("%s: bad patch operation %+v", where, op)
					}
				}
			default:
				if _, err := decodeObject(doc); err != nil {
					t.Errorf("%s: %v", where, err)
				}
			}
		}
	}
}

// checkKustomization decodes a kustomization strictly and checks that every resource and patch it
// names exists in dir.
func checkKustomization(dir string, doc []byte) []error {
	var k types.Kustomization
	if err := strict(doc, &k); err != nil {
		return []error{err}
	}
	var errs []error
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		errs = append(errs, fmt.Errorf("apiVersion %q kind %q", k.APIVersion, k.Kind))
	}
	if len(k.Resources) == 0 {
		errs = append(errs, errors.New("no resources"))
	}
	paths := slices.Clone(k.Resources)
	for _, p := range k.Patches {
		if p.Path != "" {
			paths = append(paths, p.Path)
		}
	}
	for _, p := range paths {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			errs = append(errs, fmt.Errorf("names %s: %w", p, err))
			continue
		}
		if fi.IsDir() {
			if _, err := os.Stat(filepath.Join(dir, p, "kustomization.yaml")); err != nil {
				errs = append(errs, fmt.Errorf("names directory %s, which holds no kustomization.yaml", p))
			}
		}
	}
	return errs
}

// build runs kustomize on dir, as kubectl apply -k does, and decodes what it produces strictly.
func build(t *testing.T, dir string) []any {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []any
	for _, r := range m.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decodeObject(doc)
		if err != nil {
			t.Errorf("kustomize build %s: %v", dir, err)
			continue
		}
		objs = append(objs, obj)
	}
	return objs
}

// TestKustomizationsBuild builds every kustomization and checks the Deployment each one makes: one
// pod at a time, whose reaper is a native sidecar with its tokens from a Secret, httpGet probes on
// the admin endpoint, resources and a security context, and the containment each variant is for.
func TestKustomizationsBuild(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			var d *appsv1.Deployment
			for _, obj := range build(t, dir) {
				if o, ok := obj.(*appsv1.Deployment); ok {
					d = o
				}
			}
			if d == nil {
				t.Fatalf("kustomize build %s made no Deployment", dir)
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
				t.Errorf("%s: want one replica, replaced by Recreate (two pods would be two agents on one workspace): %v, %q", dir, d.Spec.Replicas, d.Spec.Strategy.Type)
			}
			sel, labels := d.Spec.Selector, d.Spec.Template.Labels
			if sel == nil || len(sel.MatchLabels) == 0 {
				t.Errorf("%s: the Deployment has no selector", dir)
			} else {
				for k, v := range sel.MatchLabels {
					if labels[k] != v {
						t.Errorf("%s: the selector's %s=%s does not match the pod template's labels %v", dir, k, v, labels)
					}
				}
			}
			if dir == "overlays/writable-cgroup" && d.Spec.Template.Annotations["io.kubernetes.cri-o.cgroup2-mount-hierarchy-rw"] != "true" {
				t.Errorf("%s: the pod template lacks CRI-O's writable-cgroup annotation: %v", dir, d.Spec.Template.Annotations)
			}
			checkPod(t, dir, &d.Spec.Template.Spec)
		})
	}
}

// TestRequiredVersionStated: the base says which Kubernetes its native sidecar needs.
func TestRequiredVersionStated(t *testing.T) {
	b, err := os.ReadFile("base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Kubernetes 1.29 or later") {
		t.Error("base/deployment.yaml does not state that native sidecars need Kubernetes 1.29 or later")
	}
}

func checkPod(t *testing.T, dir string, pod *corev1.PodSpec) {
	t.Helper()
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != "reaper" {
		t.Fatalf("%s: init containers %v, want the reaper sidecar", dir, pod.InitContainers)
	}
	r := pod.InitContainers[0]
	if r.RestartPolicy == nil || *r.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("%s: the reaper init container is not a native sidecar (restartPolicy Always)", dir)
	}
	cmd := strings.Join(append(slices.Clone(r.Command), r.Args...), " ")
	for _, want := range []string{"reaper serve", "--http 127.0.0.1:8765", "--admin :9090"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("%s: reaper's command line %q lacks %q", dir, cmd, want)
		}
	}
	if strings.Contains(cmd, "--token") {
		t.Errorf("%s: a token on reaper's command line: %q", dir, cmd)
	}
	// A non-loopback --admin needs the admin token, which must come from a Secret too.
	for _, name := range []string{"REAPER_TOKEN", "REAPER_ADMIN_TOKEN"} {
		var token *corev1.EnvVar
		for i, e := range r.Env {
			if e.Name == name {
				token = &r.Env[i]
			}
		}
		if token == nil || token.ValueFrom == nil || token.ValueFrom.SecretKeyRef == nil || token.Value != "" {
			t.Errorf("%s: %s does not come from a Secret: %+v", dir, name, token)
		}
	}
	var adminPort int32
	for _, p := range r.Ports {
		if p.Name == "admin" {
			adminPort = p.ContainerPort
		}
	}
	if adminPort != 9090 {
		t.Errorf("%s: no container port named admin at 9090: %+v", dir, r.Ports)
	}
	for name, probe := range map[string]*corev1.Probe{"startup": r.StartupProbe, "readiness": r.ReadinessProbe, "liveness": r.LivenessProbe} {
		path := "/readyz"
		if name == "liveness" {
			path = "/healthz"
		}
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "admin" {
			t.Errorf("%s: the %s probe does not ask the admin endpoint for %s: %+v", dir, name, path, probe)
		}
	}
	var workspace bool
	for _, m := range r.VolumeMounts {
		workspace = workspace || m.MountPath == "/workspace"
	}
	if !workspace || r.WorkingDir != "/workspace" {
		t.Errorf("%s: reaper does not work in the shared /workspace volume", dir)
	}
	for _, c := range append(pod.Containers, r) {
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
			t.Errorf("%s: container %s lacks resource requests or limits: %+v", dir, c.Name, c.Resources)
		}
		if c.SecurityContext == nil {
			t.Errorf("%s: container %s states no securityContext", dir, c.Name)
		}
	}
	sc := r.SecurityContext
	privileged := sc != nil && sc.Privileged != nil && *sc.Privileged
	root := sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0
	// reaper as root must not run the agent's commands as root: --user with another user.
	if user := flagValue(r.Args, "--user"); root && (user == "" || strings.HasPrefix(user, "0:") || user == "0" || user == "root") {
		t.Errorf("%s: reaper runs as root and its tasks too (--user %q): %q", dir, user, cmd)
	}
	switch dir {
	case "base":
		if privileged || root || pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
			t.Errorf("%s: the default pod should run reaper unprivileged as a non-root user", dir)
		}
	case "overlays/privileged":
		if !privileged || !root {
			t.Errorf("%s: reaper is not privileged root: %+v", dir, sc)
		}
	case "overlays/writable-cgroup":
		if privileged || !root || pod.RuntimeClassName == nil || *pod.RuntimeClassName != "cgroup-writable" {
			t.Errorf("%s: want unprivileged root under the cgroup-writable runtime class: %+v, %v", dir, sc, pod.RuntimeClassName)
		}
	}
}

// flagValue returns the value args give the flag name ("--user x" or "--user=x"), or "".
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// TestStrictDecodingFails shows that the checks above can fail: a field spelt in another case, a
// field at the wrong level, a duplicate key, an unknown kind, a kustomization with a misspelt field
// or naming a file that does not exist.
func TestStrictDecodingFails(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n    - name: a\n      image: b\n      restartpolicy: Always\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  restartPolicy: Never\n  containers: [{name: a, image: b}]\n  livenessProbe: {}\n",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  name: y\nspec: {}\n",
		"apiVersion: batch/v1\nkind: CronJob\n",
	} {
		if _, err := decodeObject([]byte(doc)); err == nil {
			t.Errorf("decoded without an error:\n%s", doc)
		} else {
			t.Logf("refused as it should be: %v", err)
		}
	}
	for _, doc := range []string{
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresource: [pod.yaml]\n",
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [missing.yaml]\n",
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [base]\npatches: [{path: missing-patch.yaml}]\n",
	} {
		dir := t.TempDir()
		os.Mkdir(filepath.Join(dir, "base"), 0o755)
		os.WriteFile(filepath.Join(dir, "base", "kustomization.yaml"), []byte("resources: []\n"), 0o644)
		if errs := checkKustomization(dir, []byte(doc)); len(errs) == 0 {
			t.Errorf("kustomization passed:\n%s", doc)
		} else {
			t.Logf("refused as it should be: %v", errs)
		}
	}
}
