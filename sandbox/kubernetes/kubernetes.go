// Package kubernetes is the sandbox backend for a Kubernetes cluster: each
// session's sandbox is one pod, driven through the API server with
// k8s.io/client-go (pods, pods/exec), implementing the same sandbox.Provider
// contract as sandbox/docker and passing the same sandbox/sandboxtest suite.
//
// In short (docs/design/kubernetes.md has the detail and what the node must
// provide):
//
//   - Naming: the pod of a session is named "stockade-s-" + 24 hex digits of
//     sha256(owner, session), carries the labels of internal/label and a spec
//     digest; Provision is idempotent through the API server's create
//     conflict, and a pod without our labels is never adopted or deleted.
//   - The pod: a "sandbox" container that runs every command and a "keeper"
//     in the same PID namespace, whose own pids cgroup lets the killer start
//     under a fork bomb. Hardening maps to the pod's security context; the
//     pods pass Pod Security "restricted". Writable places are emptyDirs of
//     medium Memory with their share of the storage bound. The per-container
//     pids limit is an annotation that scripts/kube-up's "stockade"
//     RuntimeClass enforces, and start.sh refuses to run where it is not.
//   - Network: NetNone is a pod whose only interface is loopback (the node's
//     stockade-isolate CNI plugin); NetLimited adds a "gate" container, the
//     only uid whose packets leave the pod; NetUnrestricted is
//     sandbox.ErrNetworkingUnsupported.
//   - Commands go through pods/exec and internal/container's one exec
//     engine (wrapper, killer in the keeper, caps, out-of-memory check).
//     The killer runs as the sandbox user, so a session can kill its own
//     killer and keep a command past its timeout; it harms only itself, and
//     the Exec still returns within the bounds docs/design/kubernetes.md
//     gives.
//   - Files: reads and writes as the sandbox user through the shared scripts;
//     every archive is checked on the host (sandbox.CheckArchive).
package kubernetes

import (
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/internal/backend"
)

//go:embed scripts/start.sh
var startScript string

// DefaultNamespace is the namespace of a Config that names none.
const DefaultNamespace = "stockade"

// Container names in a session pod.
const (
	sandboxContainer = "sandbox"
	keeperContainer  = "keeper"
)

// PidsAnnotationPrefix starts the pod annotation that carries a container's
// pids limit (PidsAnnotationPrefix + container name, a decimal count): the
// node's runtime applies it (see the package documentation).
const PidsAnnotationPrefix = "pids.stockade.dev/"

// Requests of a session pod: what the scheduler reserves for an idle
// session. The limits are the Hardening's.
const (
	// RequestCPUMillis is the sandbox container's CPU request, in
	// thousandths of a CPU.
	RequestCPUMillis = 10
	// RequestMemoryBytes is the sandbox container's memory request: about
	// what an idle session uses (two sleeping BusyBox processes and the
	// pod's share of the kubelet's bookkeeping).
	RequestMemoryBytes = 16 << 20
)

// MaxCPUMillis is the highest CPU limit a pod gets, in thousandths of a
// CPU: 1024 CPUs, more than any node has.
const MaxCPUMillis = 1 << 20

// The keeper's limits: it runs sleep and, now and then, the killer.
const (
	keeperCPUMillis   = 100
	keeperMemoryBytes = 32 << 20
	keeperPidsLimit   = 32
)

// Budgets.
const (
	// removeBudget bounds a Reap or Destroy, waiting out the deletion; it
	// runs on a context detached from the caller's.
	removeBudget = 2 * time.Minute
	// terminationGrace is the pods' grace period, in seconds: their
	// processes only sleep, and SIGTERM ends them at once.
	terminationGrace = 1
)

// Config configures a Provider.
type Config struct {
	// Kubeconfig is the path of a kubeconfig file; empty means the
	// in-cluster configuration, else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string
	// Namespace holds the session pods; empty means DefaultNamespace. It
	// must exist, and the node's CNI must isolate it (see the package
	// documentation).
	Namespace string
	// Owner scopes Owned and Reap, as in sandbox/docker; empty means
	// "default". It becomes a label value: at most 63 bytes of
	// [A-Za-z0-9_.-], starting and ending with a letter or digit.
	Owner string
	// Logger receives what the provider does; nil discards.
	Logger *slog.Logger
	// RuntimeClassName is the pods' RuntimeClass; empty means the cluster's
	// default runtime. Its handler must apply the pids annotations.
	RuntimeClassName string
	// NodeSelector and Tolerations place the pods (nil: anywhere).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// GateTokenRevoker revokes a session's gate token on Reap when the
	// session was not provisioned by this process; nil means none.
	GateTokenRevoker sandbox.GateTokenRevoker
	// GateImage is the egress gate's image on the nodes, for a GateSpec
	// that names none; empty means gate.Image (stockade/gate:local,
	// which scripts/kube-up composes and imports). It is never pulled.
	GateImage string
	// GateUID is the uid (and gid) gated pods' gate containers run as;
	// zero means DefaultGateUID. The node lets only this uid's packets
	// leave a gated pod, so a Spec whose RunAsUser is this uid is refused
	// (sandbox.ErrInvalidHardening). At most 2^31-2.
	GateUID int64
	// GateAllowPrivate lists the private ranges gates may reach (a test
	// upstream, an in-cluster registry), never loopback or link-local;
	// nil admits none.
	GateAllowPrivate []netip.Prefix
	// GateExtraHosts are "name:address" lines added to gated pods'
	// /etc/hosts (the pod's hostAliases; the gate reads it before DNS):
	// to pin a name. The sandbox sees the lines too, and can reach none
	// of them but through the gate. Nil adds none.
	GateExtraHosts []string
	// ScheduleTimeout bounds how long Provision waits while the scheduler
	// reports the session's pod unschedulable (no node has room, or none
	// matches NodeSelector and Tolerations) before it removes the pod and
	// fails with sandbox.ErrNoCapacity. Zero means DefaultScheduleTimeout;
	// a negative value waits as long as Provision's context allows (for a
	// cluster whose autoscaler adds nodes for pending pods).
	ScheduleTimeout time.Duration
}

// DefaultScheduleTimeout is Config.ScheduleTimeout's zero value: the
// scheduler retries an unschedulable pod when the cluster changes, so a
// short wait rides out a session being reaped at the same time.
const DefaultScheduleTimeout = 30 * time.Second

// Provider is the Kubernetes implementation of sandbox.Provider.
type Provider struct {
	cs    k8s.Interface
	rest  *rest.Config
	ns    string
	owner string
	log   *slog.Logger
	cfg   Config
	// revokers: each session's GateTokenRevoker, and Config's.
	revokers sandbox.Revokers
	gate     gateConfig
	oom      container.OOMRecord // oom_kill counts attributed, by pod UID
	restarts backend.Restarts    // the backstop restarts of each pod

	mu    sync.Mutex
	calls int64 // API requests and exec streams, for RoundTrips
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for the cluster cfg names. It does not contact
// the cluster.
func New(cfg Config) (*Provider, error) {
	owner := cfg.Owner
	if owner == "" {
		owner = "default"
	}
	if !labelValue(owner) {
		return nil, fmt.Errorf("kubernetes: owner %q: want at most 63 bytes of letters, digits, '_', '.', '-', starting and ending with a letter or digit", owner)
	}
	ns := cfg.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	rc, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	// Sessions make many small requests; the client's default rate limit
	// (5 per second) would be the bottleneck of every benchmark.
	rc.QPS, rc.Burst = 200, 400
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	gc, err := newGateConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	return &Provider{cs: cs, rest: rc, ns: ns, owner: owner, log: log, cfg: cfg, revokers: sandbox.Revokers{Default: cfg.GateTokenRevoker}, gate: gc}, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		if rc, err := rest.InClusterConfig(); err == nil {
			return rc, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// Owner returns the owner label value the provider uses.
func (p *Provider) Owner() string { return p.owner }

// Namespace returns the namespace of the provider's pods.
func (p *Provider) Namespace() string { return p.ns }

// RoundTrips returns how many API requests and exec streams the provider
// has made.
func (p *Provider) RoundTrips() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func (p *Provider) count() {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
}

// labelValue reports whether s is a valid label value (and non-empty).
func labelValue(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return alnum(s[0]) && alnum(s[len(s)-1])
}

// PodName is the deterministic name of session id's pod for owner.
func PodName(owner string, id domain.ID) string {
	h := sha256.Sum256([]byte(owner + "\x00" + string(id)))
	return container.NamePrefix + "s-" + hex.EncodeToString(h[:12])
}

// sessionLabel is the Session label value of id: the ID itself when it is
// a valid label value, else "h-" and a hash of it.
func sessionLabel(id domain.ID) string {
	if labelValue(string(id)) {
		return string(id)
	}
	h := sha256.Sum256([]byte(id))
	return "h-" + hex.EncodeToString(h[:16])
}

// labels are what session id's pod carries.
func (p *Provider) labels(id domain.ID) map[string]string {
	l := label.Base(p.owner, label.KindSession)
	l[label.Session] = sessionLabel(id)
	return l
}

// ours reports whether pod is session id's, of this owner.
func (p *Provider) ours(pod *corev1.Pod, id domain.ID) bool {
	return label.Has(pod.Labels, p.labels(id)) && pod.Annotations[label.Session] == string(id)
}

// resolved is a Spec validated, with the pod it asks for.
type resolved struct {
	spec    sandbox.Spec
	workdir string
	uid     int64
	digest  string
	pod     *corev1.Pod
	// The egress gate of a NetLimited session (resolveGate).
	gated        bool
	gateSettings gate.Settings
	gateImage    string
	gateDigest   string
	minter       sandbox.GateTokenMinter
}

// resolve validates spec and builds the pod; nothing has touched the
// cluster yet.
func (p *Provider) resolve(spec sandbox.Spec) (*resolved, error) {
	c, err := sandbox.Resolve(spec)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if c.Runtime != "" {
		// The pods' runtime is the cluster's, through Config.RuntimeClassName.
		return nil, fmt.Errorf("kubernetes: runtime %q: this backend runs every pod under Config.RuntimeClassName (%q): %w", c.Runtime, p.cfg.RuntimeClassName, sandbox.ErrRuntimeUnavailable)
	}
	switch mode := spec.Networking.Mode(); {
	case mode == domain.NetLimited && spec.Gate == nil:
		return nil, fmt.Errorf("kubernetes: networking %q needs a Gate (egress only through the gate): %w", mode, sandbox.ErrNetworkingUnsupported)
	case mode != domain.NetNone && mode != domain.NetLimited:
		return nil, fmt.Errorf("kubernetes: networking %q: this backend gives pods loopback only, or egress through the gate: %w", mode, sandbox.ErrNetworkingUnsupported)
	}
	if !slices.Contains(c.CapDrop, "ALL") {
		return nil, fmt.Errorf("kubernetes: %w: CapDrop %q keeps capabilities; Pod Security \"restricted\" pods drop ALL", sandbox.ErrInvalidHardening, c.CapDrop)
	}
	// The kernel refuses a CFS quota above about 2^44 µs; a limit above
	// any node's CPUs means no limit, so it is clamped (as sandbox/docker
	// clamps to the engine's CPUs).
	c.CPUMillis = min(c.CPUMillis, MaxCPUMillis)
	r := &resolved{spec: spec, workdir: c.Workdir, uid: c.UID}
	if spec.Networking.Mode() == domain.NetLimited {
		if err := p.resolveGate(r, &c); err != nil {
			return nil, err
		}
	}
	r.pod = p.pod(r, c)
	// The gate's digest stands where sandbox/docker puts the network.
	r.digest = sandbox.SpecDigest(spec.Image, c.Workdir, spec.Networking, r.gateDigest, c.StorageBytes/int64(len(c.Roots)), "")
	r.pod.Annotations[label.Spec] = r.digest
	return r, nil
}

// pod builds session r's pod from its resolved confinement c.
func (p *Provider) pod(r *resolved, c sandbox.Resolved) *corev1.Pod {
	spec := r.spec
	id := spec.SessionID
	yes, no := true, false
	uid := c.UID
	grace := int64(terminationGrace)
	perRoot := c.StorageBytes / int64(len(c.Roots))
	sec := &corev1.SecurityContext{
		RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
		ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no, Privileged: &no,
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	env := make([]corev1.EnvVar, 0, len(c.Env))
	for _, k := range sortedKeys(c.Env) {
		env = append(env, corev1.EnvVar{Name: k, Value: c.Env[k]})
	}
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for i, root := range c.Roots {
		name := "w" + strconv.Itoa(i)
		size := resource.NewQuantity(perRoot, resource.BinarySI)
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: size}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: root})
	}
	q := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.BinarySI) }
	m := func(n int64) resource.Quantity { return *resource.NewMilliQuantity(n, resource.DecimalSI) }
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: PodName(p.owner, id), Namespace: p.ns, Labels: p.labels(id),
			Annotations: map[string]string{
				label.Session:                           string(id),
				PidsAnnotationPrefix + sandboxContainer: strconv.FormatInt(c.PidsLimit, 10),
				PidsAnnotationPrefix + keeperContainer:  strconv.Itoa(keeperPidsLimit),
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			ShareProcessNamespace:         &yes,
			RuntimeClassName:              nonEmpty(p.cfg.RuntimeClassName),
			NodeSelector:                  p.cfg.NodeSelector,
			Tolerations:                   p.cfg.Tolerations,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: vols,
			Containers: []corev1.Container{{
				Name: sandboxContainer, Image: spec.Image, ImagePullPolicy: corev1.PullNever,
				Command:    append([]string{"/bin/sh", "-c", startScript, "stockade-start", strconv.FormatInt(c.PidsLimit, 10), gatedArg(r.gated)}, c.Roots...),
				WorkingDir: c.Workdir, Env: env, VolumeMounts: mounts, SecurityContext: sec,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceCPU: m(c.CPUMillis), corev1.ResourceMemory: q(c.MemoryBytes), corev1.ResourceEphemeralStorage: q(c.StorageBytes)},
					Requests: corev1.ResourceList{corev1.ResourceCPU: m(min(RequestCPUMillis, c.CPUMillis)), corev1.ResourceMemory: q(min(RequestMemoryBytes, c.MemoryBytes)),
						corev1.ResourceEphemeralStorage: q(0)},
				},
			}, {
				Name: keeperContainer, Image: spec.Image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", "exec sleep 2147483647"}, WorkingDir: "/",
				SecurityContext: sec, TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: m(keeperCPUMillis), corev1.ResourceMemory: q(keeperMemoryBytes), corev1.ResourceEphemeralStorage: q(1 << 20)},
					Requests: corev1.ResourceList{corev1.ResourceCPU: m(1), corev1.ResourceMemory: q(4 << 20), corev1.ResourceEphemeralStorage: q(0)},
				},
			}},
		},
	}
	if r.gated {
		p.addGate(pod, r, sec)
	}
	return pod
}

// gatedArg is start.sh's second argument: "1" when the pod is gated.
func gatedArg(gated bool) string {
	if gated {
		return "1"
	}
	return "0"
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func sortedKeys(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// Provision implements sandbox.Provider.
func (p *Provider) Provision(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return backend.Provision(ctx, spec, &p.revokers, p.provision)
}

func (p *Provider) provision(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	start := time.Now()
	r, err := p.resolve(spec)
	if errors.Is(err, sandbox.ErrNetworkingUnsupported) {
		// An existing sandbox of the session is a mismatch first.
		if pod, ferr := p.find(ctx, spec.SessionID); ferr == nil {
			return nil, fmt.Errorf("kubernetes: session %s: %w: pod %s has networking %q: %w", spec.SessionID, sandbox.ErrSpecMismatch, pod.Name, domain.NetNone, err)
		}
	}
	if err != nil {
		return nil, err
	}
	name := r.pod.Name
	pods := p.cs.CoreV1().Pods(p.ns)
	for attempt := 0; ; attempt++ {
		want, token := r.pod, ""
		if r.minter != nil {
			// A token for this call's create only: a loser's is dropped
			// unpersisted, and the pod waits to be scheduled until the
			// winner persisted its token.
			token = r.minter.Generate()
			want = withToken(r.pod, token)
		}
		p.count()
		got, err := pods.Create(ctx, want, metav1.CreateOptions{})
		created := err == nil
		if created && r.minter != nil {
			if got, err = p.releaseToken(ctx, r, got, token); err != nil {
				return nil, errors.Join(err, p.discardCreated(ctx, got, spec, true))
			}
		}
		if apierrors.IsAlreadyExists(err) {
			p.count()
			got, err = pods.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && attempt < 20 {
				continue // deleted in between: create again
			}
		}
		if err != nil {
			return nil, fmt.Errorf("kubernetes: provision %s: %w", spec.SessionID, err)
		}
		if !created {
			if !p.ours(got, spec.SessionID) {
				return nil, fmt.Errorf("kubernetes: a pod named %s exists without this owner's session labels; refusing to adopt it", name)
			}
			if got.DeletionTimestamp != nil {
				// Being reaped: wait it out, then create anew.
				if err := p.waitGone(ctx, name, got.UID); err != nil {
					return nil, err
				}
				continue
			}
			if d := got.Annotations[label.Spec]; d != r.digest {
				return nil, fmt.Errorf("kubernetes: session %s: %w: pod %s was made from spec %s (image %q, workdir %q, gated %v), asked %s (image %q, workdir %q, gated %v)",
					spec.SessionID, sandbox.ErrSpecMismatch, name, d, got.Spec.Containers[0].Image, got.Spec.Containers[0].WorkingDir, gated(got), r.digest, spec.Image, r.workdir, r.gated)
			}
			if tokenHeld(got) {
				// Its creator is persisting the gate's token; adoption
				// persists nothing.
				held := got
				got, err = p.waitTokenReleased(ctx, held)
				switch {
				case errors.Is(err, errTokenStuck) && attempt < 20:
					p.log.Warn("removing a pod its creator never released", "pod", name, "session", string(spec.SessionID))
					if err := p.deletePod(ctx, name, held.UID); err != nil {
						return nil, err
					}
					continue
				case err != nil:
					return nil, err
				case got == nil && attempt < 20:
					continue // gone meanwhile: create again
				case got == nil:
					return nil, fmt.Errorf("kubernetes: provision %s: pod %s kept vanishing", spec.SessionID, name)
				}
			}
		}
		got, err = p.waitRunning(ctx, got, created)
		if err != nil {
			err = fmt.Errorf("kubernetes: provision %s: %w", spec.SessionID, err)
			if created {
				err = errors.Join(err, p.discardCreated(ctx, got, spec, r.minter != nil))
			}
			return nil, err
		}
		p.log.Debug("provisioned", "pod", name, "session", string(spec.SessionID), "created", created, "dur", time.Since(start))
		return p.box(got, spec.SessionID), nil
	}
}

// start.sh's exit codes when the pod is not what the spec asks.
const (
	// startRefused: an interface besides lo, another pids limit.
	startRefused = 3
	// startImageVolume: a writable mount outside the writable places (an
	// image VOLUME): sandbox.ErrUnsupportedImage.
	startImageVolume = 4
)

// errPodFailed reports a pod that will not run as asked.
var errPodFailed = errors.New("the pod cannot run")

// waitRunning watches pod until its containers run (and the sandbox's
// start checks passed, and a gate answers), or until it cannot run. fresh
// says this call created the pod: its gate's first crash is final.
func (p *Provider) waitRunning(ctx context.Context, pod *corev1.Pod, fresh bool) (*corev1.Pod, error) {
	if ok, err := runningGate(pod, fresh); ok || err != nil {
		return pod, err
	}
	limit := p.cfg.ScheduleTimeout
	if limit == 0 {
		limit = DefaultScheduleTimeout
	}
	// unplaced fires limit after the scheduler first called the pod
	// unschedulable, and is stopped once it is placed.
	var unplaced <-chan time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	watchPlacement := func() {
		switch why := unschedulable(pod); {
		case why == "" || limit < 0:
			unplaced = nil
		case unplaced == nil:
			timer = time.NewTimer(limit)
			unplaced = timer.C
		}
	}
	watchPlacement()
	p.count()
	w, err := p.cs.CoreV1().Pods(p.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String(), ResourceVersion: pod.ResourceVersion,
	})
	if err != nil {
		return pod, err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return pod, fmt.Errorf("waiting for pod %s to run: %w", pod.Name, ctx.Err())
		case <-unplaced:
			return pod, fmt.Errorf("%w: pod %s unschedulable for %v: %s", sandbox.ErrNoCapacity, pod.Name, limit, unschedulable(pod))
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The watch ended (server timeout): look again.
				p.count()
				got, err := p.cs.CoreV1().Pods(p.ns).Get(ctx, pod.Name, metav1.GetOptions{})
				if err != nil {
					return pod, err
				}
				return p.waitRunning(ctx, got, fresh)
			}
			switch ev.Type {
			case watch.Deleted:
				return pod, fmt.Errorf("%w: pod %s was deleted while starting", errPodFailed, pod.Name)
			case watch.Error:
				return pod, fmt.Errorf("watching pod %s: %v", pod.Name, apierrors.FromObject(ev.Object))
			}
			got, ok := ev.Object.(*corev1.Pod)
			if !ok || got.UID != pod.UID {
				continue
			}
			pod = got
			if ok, err := runningGate(pod, fresh); ok || err != nil {
				return pod, err
			}
			watchPlacement()
		}
	}
}

// unschedulable is the scheduler's message when it has called pod
// unschedulable (never empty then), and "" otherwise.
func unschedulable(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return ""
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return cmp.Or(c.Message, c.Reason)
		}
	}
	return ""
}

// runningGate is running, and an ErrGateDown when the pod's gate keeps
// crashing: at its first crash when fresh, else after gateCrashes
// restarts (a gate that was killed is restarted by the kubelet, and
// Provision waits for that).
func runningGate(pod *corev1.Pod, fresh bool) (bool, error) {
	ok, err := running(pod)
	if err != nil || !gated(pod) {
		return ok, err
	}
	if up, _, _ := gateState(pod); up {
		return ok, nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != gateContainer {
			continue
		}
		crashing := cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
		if crashing && (fresh || cs.RestartCount >= gateCrashes) {
			_, why, _ := gateState(pod)
			return false, fmt.Errorf("%w: pod %s: the gate keeps exiting: %s: %w", errPodFailed, pod.Name, why, ErrGateDown)
		}
	}
	return false, nil
}

// running reports whether the sandbox and keeper containers of pod run
// (a gated pod's gate: runningGate), and an error when the pod cannot get
// there: an image that is not present (nothing is ever pulled), a start
// check that failed, a pod that ended.
func running(pod *corev1.Pod) (bool, error) {
	if pod.DeletionTimestamp != nil {
		return false, fmt.Errorf("%w: pod %s is being deleted", errPodFailed, pod.Name)
	}
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, fmt.Errorf("%w: pod %s is %s: %s", errPodFailed, pod.Name, pod.Status.Phase, pod.Status.Message)
	}
	n := 0
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != sandboxContainer && cs.Name != keeperContainer {
			// The gate's own image and start (runningGate) are what
			// running reports of it.
			if w := cs.State.Waiting; w != nil && cs.Name == gateContainer {
				switch w.Reason {
				case "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
					return false, fmt.Errorf("%w: container %s: %s: %s", errPodFailed, cs.Name, w.Reason, w.Message)
				}
			}
			continue
		}
		if cs.State.Running != nil && cs.Started != nil && *cs.Started {
			n++
			continue
		}
		// start.sh's refusal (exit 3) is final; any other end (the
		// backstop's kill) is a restart on its way.
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			switch {
			case t == nil || cs.Name != sandboxContainer:
			case t.ExitCode == startRefused:
				return false, fmt.Errorf("%w: container %s refused to start: %s", errPodFailed, cs.Name, strings.TrimSpace(t.Message))
			case t.ExitCode == startImageVolume:
				return false, fmt.Errorf("%w: container %s refused to start: %s: %w", errPodFailed, cs.Name, strings.TrimSpace(t.Message), sandbox.ErrUnsupportedImage)
			}
		}
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return false, fmt.Errorf("%w: container %s: %s: %s", errPodFailed, cs.Name, w.Reason, w.Message)
			}
		}
	}
	return n == 2, nil
}

// Attach implements sandbox.Provider.
func (p *Provider) Attach(ctx context.Context, sessionID domain.ID) (sandbox.Sandbox, error) {
	if err := sessionID.Validate(); err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	pod, err := p.find(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if ok, _ := running(pod); !ok {
		return nil, fmt.Errorf("kubernetes: session %s: pod %s is %s: %w", sessionID, pod.Name, pod.Status.Phase, sandbox.ErrNotFound)
	}
	return p.box(pod, sessionID), nil
}

// find returns session id's pod, or ErrNotFound.
func (p *Provider) find(ctx context.Context, id domain.ID) (*corev1.Pod, error) {
	name := PodName(p.owner, id)
	p.count()
	pod, err := p.cs.CoreV1().Pods(p.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("kubernetes: session %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: get pod %s: %w", name, err)
	}
	if !p.ours(pod, id) || pod.DeletionTimestamp != nil {
		return nil, fmt.Errorf("kubernetes: session %s: pod %s is not this owner's or is going: %w", id, name, sandbox.ErrNotFound)
	}
	return pod, nil
}

// Owned implements sandbox.Provider.
func (p *Provider) Owned(ctx context.Context) ([]domain.ID, error) {
	p.count()
	list, err := p.cs.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(label.Base(p.owner, label.KindSession)).String()})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list pods: %w", err)
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	session := func(pod *corev1.Pod) domain.ID { return domain.ID(pod.Annotations[label.Session]) }
	ours := func(pod *corev1.Pod, id domain.ID) bool { return p.ours(pod, id) && pod.Name == PodName(p.owner, id) }
	return backend.Owned(pods, session, ours), nil
}

// Reap implements sandbox.Provider.
func (p *Provider) Reap(ctx context.Context, sessionID domain.ID) error {
	if err := sessionID.Validate(); err != nil {
		return fmt.Errorf("kubernetes: %w", err)
	}
	return p.remove(ctx, sessionID)
}

// remove revokes the session's gate token (when a revoker is known), then
// deletes its pod and waits until the API server no longer has it: the
// kubelet removes the object once the containers are gone.
func (p *Provider) remove(ctx context.Context, id domain.ID) error {
	if err := p.revokers.Revoke(ctx, id); err != nil {
		return fmt.Errorf("kubernetes: revoke gate token of %s (nothing removed): %w", id, err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeBudget)
	defer cancel()
	name := PodName(p.owner, id)
	p.count()
	pod, err := p.cs.CoreV1().Pods(p.ns).Get(rctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("kubernetes: get pod %s: %w", name, err)
	case !p.ours(pod, id):
		return fmt.Errorf("kubernetes: pod %s is not this owner's session %s; not removing it", name, id)
	default:
		if err := p.deletePod(rctx, name, pod.UID); err != nil {
			return err
		}
		p.oom.Forget(string(pod.UID))
	}
	p.revokers.Forget(id)
	return nil
}

// discardCreated deletes pod, which this Provision created and which
// failed (only that pod, by UID: never a concurrent call's), and, when
// this call persisted (or tried to persist) its gate's token, revokes it
// through spec's revoker (or Config's): the token goes with the gate that
// held it. A failed deletion or revocation is the error.
func (p *Provider) discardCreated(ctx context.Context, pod *corev1.Pod, spec sandbox.Spec, persisted bool) error {
	err := p.deletePod(ctx, pod.Name, pod.UID)
	rv := spec.GateTokenRevoker
	if rv == nil {
		rv = p.revokers.Default
	}
	if !persisted || rv == nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeBudget)
	defer cancel()
	if rerr := rv.Revoke(rctx, spec.SessionID); rerr != nil {
		err = errors.Join(err, fmt.Errorf("kubernetes: revoke the gate token of %s: %w", spec.SessionID, rerr))
	}
	return err
}

// deletePod deletes the pod name with UID uid (and nothing else of the
// name) and waits until it is gone.
func (p *Provider) deletePod(ctx context.Context, name string, uid types.UID) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeBudget)
	defer cancel()
	grace := int64(terminationGrace)
	p.count()
	err := p.cs.CoreV1().Pods(p.ns).Delete(dctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("kubernetes: delete pod %s: %w", name, err)
	}
	return p.waitGone(dctx, name, uid)
}

// waitGone waits until the pod name with UID uid no longer exists.
func (p *Provider) waitGone(ctx context.Context, name string, uid types.UID) error {
	for {
		p.count()
		pod, err := p.cs.CoreV1().Pods(p.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && pod.UID != uid {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("kubernetes: waiting for pod %s to go: %w", name, err)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		p.count()
		w, err := p.cs.CoreV1().Pods(p.ns).Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: pod.ResourceVersion,
		})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("kubernetes: waiting for pod %s to go: %w", name, ctx.Err())
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		gone := false
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				gone = true
				break
			}
		}
		w.Stop()
		if gone {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("kubernetes: waiting for pod %s to go: %w", name, ctx.Err())
		}
	}
}

// metavGet is the options of every Get.
var metavGet = metav1.GetOptions{}
