package docs

// DRA claims and fractional plugins at admission (NODE.md 10, 12.14): the
// same cases evaluated with cel-go and on the real kube-apiserver, for two
// teams (team-a, whose paddle-projects lists a no-GPU claim template, and
// team-b), honest and hostile; the claim templates' guard; and the node
// agent reading ResourceSlices on the real server with exactly the RBAC of
// deploy/kubernetes/paddle-node.yaml.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddle-entrypoint/paddle-entrypoint/node/allocation"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/resourceslices"
)

// k8sDRACase is a pod judged by both evaluations. invalidOK: the API
// server may refuse the pod as invalid before any policy (a resource name
// behind a feature gate it has off), which is no way around the rules.
type k8sDRACase struct {
	k8sCase
	invalidOK bool
}

func ptr[T any](v T) *T { return &v }

// k8sDRACases are kubernetes.md's Job's pod with its GPU from a DRA claim
// or a fractional plugin, in team-a and team-b.
func k8sDRACases(t *testing.T, m k8sManifests) []k8sDRACase {
	t.Helper()
	job := m.job.DeepCopy()
	// pod is the Job's pod in ns with its GPU from the claim template
	// single-gpu instead of nvidia.com/gpu, changed by f.
	pod := func(name, ns string, f func(p *corev1.Pod, c *corev1.Container)) *corev1.Pod {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: *job.Spec.Template.ObjectMeta.DeepCopy(), Spec: *job.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace = name, ns
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr("single-gpu")}}
		c := &p.Spec.Containers[0]
		c.Resources = corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
		if f != nil {
			f(p, c)
		}
		return p
	}
	setEnv := func(c *corev1.Container, name, value string) {
		for i := range c.Env {
			if c.Env[i].Name == name {
				c.Env[i] = corev1.EnvVar{Name: name, Value: value}
				return
			}
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
	env := func(name, value string) func(*corev1.Pod, *corev1.Container) {
		return func(_ *corev1.Pod, c *corev1.Container) { setEnv(c, name, value) }
	}
	both := func(fs ...func(*corev1.Pod, *corev1.Container)) func(*corev1.Pod, *corev1.Container) {
		return func(p *corev1.Pod, c *corev1.Container) {
			for _, f := range fs {
				f(p, c)
			}
		}
	}
	// limits makes the container's GPU a plugin's resources instead.
	limits := func(l corev1.ResourceList) func(*corev1.Pod, *corev1.Container) {
		return func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.ResourceClaims = nil
			c.Resources = corev1.ResourceRequirements{Limits: l}
		}
	}
	hami := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), "nvidia.com/gpumem": resource.MustParse("20000"), "nvidia.com/gpucores": resource.MustParse("30")}
	// sidecar adds a container with its own command using the claim entry
	// cache (template or claim), with PADDLE_GPU_SHARE set.
	sidecar := func(template, claim string) func(*corev1.Pod, *corev1.Container) {
		return func(p *corev1.Pod, _ *corev1.Container) {
			rc := corev1.PodResourceClaim{Name: "cache"}
			if template != "" {
				rc.ResourceClaimTemplateName = ptr(template)
			} else {
				rc.ResourceClaimName = ptr(claim)
			}
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, rc)
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "loader", Image: "busybox:1.36",
				Command: []string{"sh", "-c", "fill-cache"}, Env: []corev1.EnvVar{{Name: "PADDLE_GPU_SHARE", Value: "0.001"}},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "cache"}}}})
		}
	}
	const keeps = ", a setting the platform keeps in namespace "
	c := func(name string, obj any, class, deny string) k8sDRACase {
		return k8sDRACase{k8sCase: k8sCase{name: name, obj: obj, class: class, deny: deny}}
	}
	cases := []k8sDRACase{
		// Honest.
		c("team-a: the Job's pod with a DRA claim (PADDLE_PRIORITY=high, allowed)", pod("d-claim", "team-a", nil), "paddle-high", ""),
		c("team-b: a DRA claim, PADDLE_PRIORITY=medium", pod("d-claim-b", "team-b", env("PADDLE_PRIORITY", "medium")), "paddle-medium", ""),
		c("team-a: a loader on the no-GPU template dataset-cache runs its own command", pod("d-cache", "team-a", sidecar("dataset-cache", "")), "paddle-high", ""),
		c("team-b: HAMi's fractional resources, PADDLE_PRIORITY=low", pod("d-hami-b", "team-b", both(limits(hami), env("PADDLE_PRIORITY", "low"))), "paddle-low", ""),
		c("team-a: a claim by name (a shared claim)", pod("d-shared", "team-a", func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr("shared-gpu")}}
		}), "paddle-high", ""),

		// Hostile: every rule applies to claim and fractional containers.
		c("team-a: a claim container setting PADDLE_GPU_SHARE", pod("d-share", "team-a", env("PADDLE_GPU_SHARE", "0.001")), "",
			"container train sets PADDLE_GPU_SHARE"+keeps+"team-a"),
		c("team-a: a claim container giving --mode=exec", pod("d-mode", "team-a", func(_ *corev1.Pod, c *corev1.Container) {
			c.Args = []string{"--mode=exec", "python", "train.py"}
		}), "", "container train gives the entrypoint --mode=exec (PADDLE_ENTRYPOINT_MODE)"+keeps+"team-a"),
		c("team-a: a claim container with its own command", pod("d-command", "team-a", func(_ *corev1.Pod, c *corev1.Container) {
			c.Command = []string{"python", "train.py"}
		}), "", "container train runs python instead of the entrypoint (namespace team-a)"),
		c("team-a: a claim container mounting over the entrypoint", pod("d-mount", "team-a", func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "over", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "over", MountPath: "/usr/local/bin"})
		}), "", "container train mounts over at /usr/local/bin (namespace team-a)"),
		c("team-b: a claim container asking PADDLE_PRIORITY=high", pod("d-high-b", "team-b", nil), "",
			"priority class paddle-high is not one namespace team-b may use: paddle-low, paddle-medium"),
		c("team-b: a claim container claiming another team's project", pod("d-project-b", "team-b", both(env("PADDLE_PRIORITY", "low"), env("PADDLE_PROJECT", "ocr-invoices"))), "",
			"PADDLE_PROJECT must be a project namespace team-b may claim: search_ranking"),
		c("team-b: HAMi's gpucores with PADDLE_GPU_SHARE", pod("d-hami-share", "team-b", both(env("PADDLE_PRIORITY", "low"),
			limits(corev1.ResourceList{"nvidia.com/gpucores": resource.MustParse("30")}), env("PADDLE_GPU_SHARE", "0.3"))), "",
			"container train sets PADDLE_GPU_SHARE"+keeps+"team-b"),
		c("team-b: nvidia.com/gpumem-percentage with its own command", pod("d-hami-command", "team-b", both(env("PADDLE_PRIORITY", "low"),
			limits(corev1.ResourceList{"nvidia.com/gpumem-percentage": resource.MustParse("50")}), func(_ *corev1.Pod, c *corev1.Container) {
				c.Command = []string{"torchrun", "mine.py"}
			})), "", "container train runs torchrun instead of the entrypoint (namespace team-b)"),
		c("team-b: a time-sliced nvidia.com/gpu.shared with --gpu-share", pod("d-shared-plugin", "team-b", both(env("PADDLE_PRIORITY", "low"),
			limits(corev1.ResourceList{"nvidia.com/gpu.shared": resource.MustParse("1")}), func(_ *corev1.Pod, c *corev1.Container) {
				c.Args = []string{"--gpu-share=0.01", "python", "train.py"}
			})), "", "container train gives the entrypoint --gpu-share=0.01 (PADDLE_GPU_SHARE)"+keeps+"team-b"),
		c("team-a: an init container on a claim by name, running a shell", pod("d-init", "team-a", func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "warm", ResourceClaimName: ptr("shared-gpu")})
			p.Spec.InitContainers = []corev1.Container{{Name: "warmup", Image: "busybox:1.36", Command: []string{"sh", "-c", "train"},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "warm"}}}}}
		}), "", "container warmup runs sh instead of the entrypoint (namespace team-a)"),
		c("team-a: the no-GPU template beside a GPU claim in one container", pod("d-mixed", "team-a", func(p *corev1.Pod, c *corev1.Container) {
			sidecar("dataset-cache", "")(p, c)
			l := &p.Spec.Containers[1]
			l.Resources.Claims = append(l.Resources.Claims, corev1.ResourceClaim{Name: "gpu"})
		}), "", "container loader runs sh instead of the entrypoint (namespace team-a)"),
		c("team-b: another namespace's no-GPU template name counts as a GPU here", pod("d-foreign-list", "team-b", both(env("PADDLE_PRIORITY", "low"), sidecar("dataset-cache", ""))), "",
			"container loader runs sh instead of the entrypoint (namespace team-b)"),
		c("team-a: a claim named dataset-cache (a claim, not the template) is no GPU too", pod("d-cache-claim", "team-a", sidecar("", "dataset-cache")), "paddle-high", ""),
	}
	// DRA's implicit extended resource of a GPU DeviceClass.
	ext := c("team-a: DRA's extended resource of gpu.nvidia.com with PADDLE_GPU_SHARE", pod("d-extended", "team-a", both(
		limits(corev1.ResourceList{"deviceclass.resource.kubernetes.io/gpu.nvidia.com": resource.MustParse("1")}), env("PADDLE_GPU_SHARE", "0.001"))), "",
		"container train sets PADDLE_GPU_SHARE"+keeps+"team-a")
	ext.invalidOK = true
	return append(cases, ext)
}

// k8sClaimObject is a ResourceClaimTemplate (template true) or a
// ResourceClaim of ns requesting the device classes, the first exactly,
// the rest as firstAvailable alternatives.
func k8sClaimObject(kind, name, ns string, classes ...string) map[string]any {
	req := map[string]any{"name": "dev"}
	if len(classes) == 1 {
		req["exactly"] = map[string]any{"deviceClassName": classes[0]}
	} else {
		var alts []any
		for i, c := range classes {
			alts = append(alts, map[string]any{"name": fmt.Sprintf("alt%d", i), "deviceClassName": c})
		}
		req["firstAvailable"] = alts
	}
	spec := map[string]any{"devices": map[string]any{"requests": []any{req}}}
	obj := map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": map[string]any{"name": name, "namespace": ns}}
	if kind == "ResourceClaimTemplate" {
		obj["spec"] = map[string]any{"spec": spec}
	} else {
		obj["spec"] = spec
	}
	return obj
}

type k8sClaimCase struct {
	name string
	obj  map[string]any
	deny string
}

func k8sClaimCases() []k8sClaimCase {
	const listed = " of namespace team-a is listed under nonGPUClaimTemplates of its paddle-projects ConfigMap but requests DeviceClass "
	return []k8sClaimCase{
		{"the no-GPU template asking for a disk", k8sClaimObject("ResourceClaimTemplate", "dataset-cache", "team-a", "disk.example.com"), ""},
		{"a GPU template not listed", k8sClaimObject("ResourceClaimTemplate", "single-gpu", "team-a", "gpu.nvidia.com"), ""},
		{"team-b's dataset-cache asking for a GPU (team-b lists nothing)", k8sClaimObject("ResourceClaimTemplate", "dataset-cache", "team-b", "gpu.nvidia.com"), ""},
		{"the no-GPU template asking for a GPU", k8sClaimObject("ResourceClaimTemplate", "dataset-cache", "team-a", "gpu.nvidia.com"),
			"ResourceClaimTemplate dataset-cache" + listed + "gpu.nvidia.com, a GPU (gpuDeviceClasses: gpu.nvidia.com, mig.nvidia.com)"},
		{"the no-GPU template with a MIG alternative", k8sClaimObject("ResourceClaimTemplate", "dataset-cache", "team-a", "disk.example.com", "mig.nvidia.com"),
			"ResourceClaimTemplate dataset-cache" + listed + "mig.nvidia.com"},
		{"a claim named dataset-cache asking for a GPU", k8sClaimObject("ResourceClaim", "dataset-cache", "team-a", "gpu.nvidia.com"),
			"ResourceClaim dataset-cache" + listed + "gpu.nvidia.com"},
	}
}

// TestK8sDRAAdmissionPolicy: the cases with cel-go.
func TestK8sDRAAdmissionPolicy(t *testing.T) {
	m := k8sLoad(t)
	pol := k8sCompile(t, m.policy)
	params := k8sParams(t, m)
	for _, c := range k8sDRACases(t, m) {
		ns := k8sUnstructured(t, c.obj)["metadata"].(map[string]any)["namespace"].(string)
		failed := pol.admit(t, c.obj, params[ns])
		switch {
		case c.deny == "" && len(failed) > 0:
			t.Errorf("%s: denied: %q", c.name, failed)
		case c.deny != "" && (len(failed) == 0 || !strings.Contains(strings.Join(failed, "\n"), c.deny)):
			t.Errorf("%s: failed %q, want a denial naming %q", c.name, failed, c.deny)
		}
	}
	guard := k8sCompile(t, m.claimsGuard)
	if len(m.claimTemplates) != 1 || m.claimTemplates[0].Name != "single-gpu" {
		t.Fatalf("kubernetes.md's claim templates: %v, want single-gpu", m.claimTemplates)
	}
	if failed := guard.admit(t, m.claimTemplates[0], params[m.claimTemplates[0].Namespace]); len(failed) > 0 {
		t.Errorf("kubernetes.md's template single-gpu: denied %q", failed)
	}
	for _, c := range k8sClaimCases() {
		ns := c.obj["metadata"].(map[string]any)["namespace"].(string)
		failed := guard.admit(t, c.obj, params[ns])
		switch {
		case c.deny == "" && len(failed) > 0:
			t.Errorf("%s: denied: %q", c.name, failed)
		case c.deny != "" && (len(failed) == 0 || !strings.Contains(strings.Join(failed, "\n"), c.deny)):
			t.Errorf("%s: failed %q, want a denial naming %q", c.name, failed, c.deny)
		}
	}
	// A Job whose template holds a claim container is checked too.
	j := m.job.DeepCopy()
	j.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	j.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr("single-gpu")}}
	j.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
	j.Spec.Template.Spec.Containers[0].Env = append(j.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "PADDLE_ENTRYPOINT_MODE", Value: "exec"})
	if failed := pol.admit(t, j, params["team-a"]); !strings.Contains(strings.Join(failed, "\n"), "container train sets PADDLE_ENTRYPOINT_MODE") {
		t.Errorf("a Job with a claim container in exec mode: %q", failed)
	}
}

// k8sDeviceClass selects a driver's devices.
func k8sDeviceClass(name, driver string) map[string]any {
	return map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"selectors": []any{map[string]any{"cel": map[string]any{"expression": "device.driver == '" + driver + "'"}}}}}
}

// TestK8sAPIServerDRAAdmission: the cases on the real kube-apiserver, with
// the DeviceClasses, team-b's list, and the claim templates' guard.
func TestK8sAPIServerDRAAdmission(t *testing.T) {
	s := k8sStartServer(t)
	priority, err := os.ReadFile("../deploy/kubernetes/priority.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range append(k8sObjects(t, priority), k8sAdmissionObjects(t)...) {
		s.mustCreate(t, obj)
	}
	m := k8sLoad(t)
	s.mustCreate(t, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "team-a"}})
	s.mustCreate(t, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"paddle.example.com/admission": "enforce"}}})
	s.mustCreate(t, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "team-b"}})
	s.mustCreate(t, k8sParams(t, m)["team-b"])
	for _, dc := range [][2]string{{"gpu.nvidia.com", "gpu.nvidia.com"}, {"mig.nvidia.com", "gpu.nvidia.com"}, {"disk.example.com", "disk.example.com"}} {
		s.mustCreate(t, k8sDeviceClass(dc[0], dc[1]))
	}
	cases := k8sDRACases(t, m)
	k8sEventually(t, "the policies on claim containers and claim templates", func() string {
		code, out := s.create(t, s.admin, cases[5].obj, "?dryRun=All") // PADDLE_GPU_SHARE in a claim container
		if code != http.StatusForbidden {
			return fmt.Sprintf("pod %d %s", code, k8sString(out, "message"))
		}
		code, out = s.create(t, s.admin, k8sClaimCases()[3].obj, "?dryRun=All")
		if code != http.StatusForbidden {
			return fmt.Sprintf("template %d %s", code, k8sString(out, "message"))
		}
		code, out = s.create(t, s.admin, cases[1].obj, "?dryRun=All") // team-b's list is read
		if code != http.StatusCreated {
			return fmt.Sprintf("team-b %d %s", code, k8sString(out, "message"))
		}
		return ""
	})
	const denied = `ValidatingAdmissionPolicy 'paddle-labels' with binding 'paddle-labels' denied request: `
	for _, c := range cases {
		code, out := s.create(t, s.admin, c.obj, "?dryRun=All")
		msg := k8sString(out, "message")
		switch {
		case c.invalidOK && code == http.StatusUnprocessableEntity:
			t.Logf("%s: refused as invalid before admission (a feature gate off): %s", c.name, msg)
		case c.deny != "":
			if code != http.StatusForbidden || !strings.Contains(msg, denied) || !strings.Contains(msg, c.deny) {
				t.Errorf("%s: %d %q, want 403 with %q", c.name, code, msg, c.deny)
			}
		case code != http.StatusCreated:
			t.Errorf("%s: %d %s", c.name, code, msg)
		case k8sString(out, "spec", "priorityClassName") != c.class:
			t.Errorf("%s: priorityClassName %q, want %q", c.name, k8sString(out, "spec", "priorityClassName"), c.class)
		}
	}
	const guardDenied = `ValidatingAdmissionPolicy 'paddle-claims-guard' with binding 'paddle-claims-guard' denied request: `
	for _, c := range k8sClaimCases() {
		code, out := s.create(t, s.admin, c.obj, "?dryRun=All")
		msg := k8sString(out, "message")
		switch {
		case c.deny != "":
			if code != http.StatusForbidden || !strings.Contains(msg, guardDenied) || !strings.Contains(msg, c.deny) {
				t.Errorf("%s: %d %q, want 403 with %q", c.name, code, msg, c.deny)
			}
		case code != http.StatusCreated:
			t.Errorf("%s: %d %s", c.name, code, msg)
		}
	}
	// kubernetes.md's template, created for good.
	tmpl := k8sUnstructured(t, m.claimTemplates[0])
	tmpl["apiVersion"], tmpl["kind"] = "resource.k8s.io/v1", "ResourceClaimTemplate"
	if code, out := s.create(t, s.admin, tmpl, ""); code != http.StatusCreated {
		t.Errorf("kubernetes.md's ResourceClaimTemplate: %d %s", code, k8sString(out, "message"))
	}
}

// TestK8sAPIServerAgentReadsResourceSlices: the agent's ServiceAccount,
// ClusterRole and binding from paddle-node.yaml on the real server; with a
// token of that ServiceAccount the agent's own watcher lists its node's
// ResourceSlices (not another node's), sees a slice added later through
// the watch, and lists the ResourceClaims; anything else is refused.
func TestK8sAPIServerAgentReadsResourceSlices(t *testing.T) {
	s := k8sStartServer(t)
	b, err := os.ReadFile("../deploy/kubernetes/paddle-node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range k8sObjects(t, b) {
		if obj["kind"] != "DaemonSet" {
			s.mustCreate(t, obj)
		}
	}
	s.mustCreate(t, k8sDeviceClass("gpu.nvidia.com", "gpu.nvidia.com"))
	slice := func(name, node string, devices ...[2]string) map[string]any {
		var devs []any
		for _, d := range devices {
			devs = append(devs, map[string]any{"name": d[0], "attributes": map[string]any{
				"type": map[string]any{"string": "gpu"}, "uuid": map[string]any{"string": d[1]}}})
		}
		return map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"driver": "gpu.nvidia.com", "nodeName": node,
				"pool": map[string]any{"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devs}}
	}
	s.mustCreate(t, slice("gpu-node-7-gpu", "gpu-node-7", [2]string{"gpu-0", "GPU-70000000-0000-4000-8000-000000000000"}))
	s.mustCreate(t, slice("gpu-node-8-gpu", "gpu-node-8", [2]string{"gpu-0", "GPU-80000000-0000-4000-8000-000000000000"}))

	// A token of the DaemonSet's ServiceAccount, as the kubelet projects it.
	code, body := s.do(t, s.admin, "POST", "/api/v1/namespaces/paddle-node/serviceaccounts/paddle-node/token",
		map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": map[string]any{"expirationSeconds": 3600}})
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if json.Unmarshal(body, &tr); code != http.StatusCreated || tr.Status.Token == "" {
		t.Fatalf("TokenRequest for paddle-node/paddle-node: %d %s", code, body)
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600)
	kc, _ := json.Marshal(map[string]any{"current-context": "agent",
		"clusters": []any{map[string]any{"name": "c", "cluster": map[string]any{"server": s.base, "certificate-authority-data": base64.StdEncoding.EncodeToString(s.caPEM)}}},
		"users":    []any{map[string]any{"name": "u", "user": map[string]any{"tokenFile": tokenFile}}},
		"contexts": []any{map[string]any{"name": "agent", "context": map[string]any{"cluster": "c", "user": "u"}}}})
	kubeconfig := filepath.Join(dir, "kubeconfig.json")
	os.WriteFile(kubeconfig, kc, 0o600)
	client, err := resourceslices.FromKubeconfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var failures []string
	w := resourceslices.New(client, "gpu-node-7", []string{"gpu.nvidia.com"}, func(res string, err error) {
		failures = append(failures, res+": "+err.Error())
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	// RBAC takes effect once the server's informers have the binding.
	wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
	defer wcancel()
	if !w.WaitSynced(wctx) {
		t.Fatalf("the agent's watcher never listed slices and claims: %v", failures)
	}
	dev := func(name string) resourceslices.Resolved {
		return w.Resolve(allocation.ClaimDevice{Driver: "gpu.nvidia.com", Pool: "gpu-node-7", Device: name})
	}
	if r := dev("gpu-0"); r.Outcome != resourceslices.Whole || r.Device.UUID != "GPU-70000000-0000-4000-8000-000000000000" {
		t.Errorf("gpu-node-7's gpu-0: %+v", r)
	}
	if r := w.Resolve(allocation.ClaimDevice{Driver: "gpu.nvidia.com", Pool: "gpu-node-8", Device: "gpu-0"}); r.Outcome != resourceslices.Unknown {
		t.Errorf("another node's device is known: %+v", r)
	}
	s.mustCreate(t, slice("gpu-node-7-more", "gpu-node-7", [2]string{"gpu-1", "GPU-71000000-0000-4000-8000-000000000000"}))
	k8sEventually(t, "the added slice through the watch", func() string {
		if r := dev("gpu-1"); r.Outcome != resourceslices.Whole {
			return fmt.Sprintf("%+v", r)
		}
		return ""
	})
	// Nothing else: no pods, no secrets, no writing slices.
	for _, req := range [][2]string{{"GET", "/api/v1/pods"}, {"GET", "/api/v1/namespaces/paddle-node/secrets"}, {"GET", "/apis/resource.k8s.io/v1/deviceclasses"}} {
		if code, body := s.do(t, tr.Status.Token, req[0], req[1], nil); code != http.StatusForbidden {
			t.Errorf("the agent's token: %s %s answered %d %s, want 403", req[0], req[1], code, body)
		}
	}
	if code, body := s.do(t, tr.Status.Token, "POST", "/apis/resource.k8s.io/v1/resourceslices", slice("forged", "gpu-node-7")); code != http.StatusForbidden {
		t.Errorf("the agent's token creating a slice: %d %s, want 403", code, body)
	}
}
