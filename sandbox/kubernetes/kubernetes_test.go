package kubernetes

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/sandboxtest"
)

// KubeconfigEnv names the kubeconfig of the cluster the engine tests use
// (scripts/kube-up prints it). Unset, they skip, or fail under
// STOCKADE_REQUIRE_ENGINE=1.
const KubeconfigEnv = "STOCKADE_KUBECONFIG"

// testImage is the image scripts/kube-up imports into the node:
// internal/image's BusyBox base image.
const testImage = "stockade/base:local"

// cluster returns a provider for the test cluster with a fresh owner, or
// skips (fails when engines are required).
func cluster(t *testing.T) (*Provider, string) {
	t.Helper()
	kc := os.Getenv(KubeconfigEnv)
	if kc == "" {
		if enginetest.Required() {
			t.Fatalf("a cluster is required (%s=1) but %s is not set: run scripts/kube-up", enginetest.RequireEnv, KubeconfigEnv)
		}
		t.Skipf("no cluster: set %s (scripts/kube-up prints it)", KubeconfigEnv)
	}
	owner := strings.Trim(strings.ReplaceAll(enginetest.Owner(t), "_", "-"), "-._")
	p, err := New(Config{Kubeconfig: kc, Owner: owner, RuntimeClassName: "stockade"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.cs.CoreV1().Namespaces().Get(ctx, p.ns, metav1.GetOptions{}); err != nil {
		if enginetest.Required() {
			t.Fatalf("cluster at %s not usable: %v", kc, err)
		}
		t.Skipf("cluster at %s not usable: %v", kc, err)
	}
	return p, owner
}

func TestContract(t *testing.T) {
	_, owner := cluster(t)
	u := startUpstream(t)
	p, err := New(testGateConfig(u, owner))
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(testGateConfig(u, owner))
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, sandboxtest.Harness{
		Provider:               p,
		Other:                  other,
		Image:                  testImage,
		NetUnrestrictedRefused: true,
		Gate:                   u.harness(),
		Squat: func(ctx context.Context, id domain.ID) (func(), error) {
			r, err := p.resolve(sandbox.Spec{SessionID: id, Image: testImage})
			if err != nil {
				return nil, err
			}
			pod := r.pod
			pod.Labels = map[string]string{label.Managed: label.ManagedValue, label.Owner: owner, label.Kind: "squat"}
			if _, err := p.cs.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
			return func() {
				grace := int64(0)
				p.cs.CoreV1().Pods(p.ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
			}, nil
		},
		RoundTrips: p.RoundTrips,
		Leftovers: func(ctx context.Context) ([]string, error) {
			list, err := p.cs.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(map[string]string{label.Owner: owner}).String()})
			if err != nil {
				return nil, err
			}
			var out []string
			for _, pod := range list.Items {
				if pod.Labels[label.Kind] != "squat" {
					out = append(out, "pod "+pod.Name)
				}
			}
			return out, nil
		},
	})
}

// TestPodSecurityRestricted checks with the API server's own admission
// (a server-side dry run in the namespace, which enforces Pod Security
// "restricted") that the pods the backend makes pass the profile, and that
// the namespace does enforce it: a pod one setting weaker is refused.
func TestPodSecurityRestricted(t *testing.T) {
	p, _ := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := p.cs.CoreV1().Namespaces().Get(ctx, p.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Fatalf("namespace %s enforces %q; want restricted", p.ns, got)
	}
	uid := int64(4242)
	for _, spec := range []sandbox.Spec{
		{SessionID: "psa-default", Image: testImage},
		{SessionID: "psa-custom", Image: testImage, Hardening: sandbox.Hardening{RunAsUser: &uid, PidsLimit: 100, MemoryBytes: 128 << 20, ReadOnlyRootfs: true}},
		{SessionID: "psa-gated", Image: testImage, Networking: domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{"example.com"}},
			Gate: &sandbox.GateSpec{TokenMinter: nopMinter{}}},
	} {
		r, err := p.resolve(spec)
		if err != nil {
			t.Fatal(err)
		}
		if r.minter != nil {
			r.pod = withToken(r.pod, "t") // as Provision creates it
		}
		dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		if _, err := p.cs.CoreV1().Pods(p.ns).Create(ctx, r.pod, dry); err != nil {
			t.Errorf("the API server refused the pod of %s: %v", spec.SessionID, err)
		}
		for name, weaken := range map[string]func(*corev1.Pod){
			"privilege escalation": func(pod *corev1.Pod) {
				yes := true
				pod.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = &yes
			},
			"capability kept": func(pod *corev1.Pod) { pod.Spec.Containers[1].SecurityContext.Capabilities.Drop = nil },
			"last container's capability kept": func(pod *corev1.Pod) {
				c := &pod.Spec.Containers[len(pod.Spec.Containers)-1]
				sc := c.SecurityContext.DeepCopy()
				sc.Capabilities.Drop = nil
				c.SecurityContext = sc
			},
			"no seccomp": func(pod *corev1.Pod) {
				pod.Spec.SecurityContext.SeccompProfile = nil
				pod.Spec.Containers[0].SecurityContext.SeccompProfile = nil
			},
			"root allowed": func(pod *corev1.Pod) {
				no := false
				pod.Spec.SecurityContext.RunAsNonRoot = &no
				pod.Spec.Containers[0].SecurityContext.RunAsNonRoot = &no
			},
		} {
			pod := r.pod.DeepCopy()
			weaken(pod)
			_, err := p.cs.CoreV1().Pods(p.ns).Create(ctx, pod, dry)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
				t.Errorf("a pod with %s: %v; want Forbidden by Pod Security restricted", name, err)
			}
		}
	}
}

func TestPodSpec(t *testing.T) {
	p, err := New(Config{Kubeconfig: writeKubeconfig(t), Owner: "o", RuntimeClassName: "rc"})
	if err != nil {
		t.Fatal(err)
	}
	uid := int64(4242)
	r, err := p.resolve(sandbox.Spec{SessionID: "s1", Image: "img", Env: map[string]string{"A": "b"},
		Hardening: sandbox.Hardening{RunAsUser: &uid, PidsLimit: 100, MemoryBytes: 128 << 20, EphemeralStorageBytes: 32 << 20, CPUMillis: 1500, ReadOnlyRootfs: true}})
	if err != nil {
		t.Fatal(err)
	}
	pod := r.pod
	if pod.Name != PodName("o", "s1") || pod.Name != PodName("o", "s1") || PodName("o", "s1") == PodName("o2", "s1") {
		t.Errorf("pod name %q not deterministic per owner and session", pod.Name)
	}
	if !label.Has(pod.Labels, p.labels("s1")) || pod.Annotations[label.Session] != "s1" || pod.Annotations[label.Spec] != r.digest {
		t.Errorf("labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if pod.Annotations[PidsAnnotationPrefix+sandboxContainer] != "100" {
		t.Errorf("pids annotation %v", pod.Annotations)
	}
	s := pod.Spec
	if !*s.ShareProcessNamespace || *s.AutomountServiceAccountToken || *s.EnableServiceLinks || s.HostNetwork || s.HostPID || *s.RuntimeClassName != "rc" {
		t.Errorf("pod spec: %+v", s)
	}
	c := s.Containers[0]
	sc := c.SecurityContext
	if *sc.RunAsUser != 4242 || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("security context %+v", sc)
	}
	lim := c.Resources.Limits
	if lim.Cpu().MilliValue() != 1500 || lim.Memory().Value() != 128<<20 || lim.StorageEphemeral().Value() != 32<<20 {
		t.Errorf("limits %v", lim)
	}
	if req := c.Resources.Requests; req.Cpu().MilliValue() != RequestCPUMillis || req.Memory().Value() != RequestMemoryBytes {
		t.Errorf("requests %v", req)
	}
	var total int64
	for _, v := range s.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
			t.Errorf("volume %+v; want a memory emptyDir", v)
			continue
		}
		total += v.EmptyDir.SizeLimit.Value()
	}
	if len(s.Volumes) != len(sandbox.WritablePaths("")) || total != 32<<20 {
		t.Errorf("%d volumes of %d bytes in all; want %d of 32 MiB", len(s.Volumes), total, len(sandbox.WritablePaths("")))
	}
	// The digest covers what must match.
	r2, _ := p.resolve(sandbox.Spec{SessionID: "s1", Image: "img2", Env: map[string]string{"A": "b"},
		Hardening: sandbox.Hardening{RunAsUser: &uid, PidsLimit: 100, MemoryBytes: 128 << 20, EphemeralStorageBytes: 32 << 20, CPUMillis: 1500, ReadOnlyRootfs: true}})
	if r2.digest == r.digest {
		t.Errorf("another image has the same digest")
	}
	for name, spec := range map[string]sandbox.Spec{
		"unrestricted": {SessionID: "s", Image: "i", Networking: domain.Networking{Type: domain.NetUnrestricted}},
		"limited":      {SessionID: "s", Image: "i", Networking: domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{"example.com"}}},
	} {
		if _, err := p.resolve(spec); !errors.Is(err, sandbox.ErrNetworkingUnsupported) {
			t.Errorf("%s: %v; want ErrNetworkingUnsupported", name, err)
		}
	}
	if _, err := p.resolve(sandbox.Spec{SessionID: "s", Image: "i", Hardening: sandbox.Hardening{CapDrop: []string{"NET_RAW"}, ReadOnlyRootfs: true}}); !errors.Is(err, sandbox.ErrInvalidHardening) {
		t.Errorf("CapDrop without ALL: %v; want ErrInvalidHardening", err)
	}
}

// writeKubeconfig writes a kubeconfig naming an unreachable server: New
// does not contact the cluster.
func writeKubeconfig(t *testing.T) string {
	f := t.TempDir() + "/kc"
	err := os.WriteFile(f, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestProvisionUnschedulable: a pod the scheduler cannot place (here no
// node matches the selector) fails Provision with ErrNoCapacity after
// ScheduleTimeout, not when the caller's context ends, and leaves no pod.
func TestProvisionUnschedulable(t *testing.T) {
	base, owner := cluster(t)
	p, err := New(Config{Kubeconfig: os.Getenv(KubeconfigEnv), Owner: owner, RuntimeClassName: "stockade",
		NodeSelector: map[string]string{"stockade.test/no-such-node": "true"}, ScheduleTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	_, err = p.Provision(ctx, sandbox.Spec{SessionID: "unplaced", Image: testImage})
	if !errors.Is(err, sandbox.ErrNoCapacity) {
		t.Fatalf("Provision = %v; want ErrNoCapacity", err)
	}
	if took := time.Since(t0); took > time.Minute {
		t.Errorf("Provision took %v: the schedule timeout did not end the wait", took)
	}
	if !strings.Contains(err.Error(), "node") {
		t.Errorf("error %q does not carry the scheduler's reason", err)
	}
	list, err := base.cs.CoreV1().Pods(base.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(map[string]string{label.Owner: owner}).String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range list.Items {
		if pod.DeletionTimestamp == nil {
			t.Errorf("pod %s left behind", pod.Name)
		}
	}
}
