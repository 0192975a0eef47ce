package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/egress"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/internal/sessiongate"
)

// A NetLimited session's pod has a third container, "gate", running
// Stockade's egress gate (cmd/stockade-gate) as Config.GateUID, a uid no
// sandbox may run as. The pod's containers share one network namespace;
// the node (stockade-isolate, for pods annotated label.GateUID) keeps the
// pod's interface and lets only that uid's packets leave it. The gate
// listens on GateListen, loopback only, where the sandbox's proxy
// variables point; its control socket is a path in a directory only the
// gate container mounts. See the package documentation and
// docs/SECURITY.md.

// ErrGateDown reports a gated session whose gate is not running: its
// sandbox reaches nothing until the kubelet has restarted the gate (the
// next Exec or Provision waits for that, at most GateHealBudget).
var ErrGateDown = egress.ErrGateDown

const (
	// gateContainer is the gate's container in a gated pod.
	gateContainer = "gate"
	// GateListen is where a gated pod's gate takes proxy requests: the
	// pod's loopback, port gate.Port.
	GateListen = "127.0.0.1:3128"
	// gateControlDir is the gate's own emptyDir, mounted in no other
	// container; its control socket is gateControl.
	gateControlDir = "/run/stockade-gate"
	gateControl    = gateControlDir + "/control"
	gateVolume     = "gate"
	// DefaultGateUID is Config.GateUID's zero value: a uid of no image's
	// user (65532 is "nonroot" in distroless images; Stockade's images have
	// none), distinct from the sandbox's default, 65534.
	DefaultGateUID = 65532
	// tokenGate is the scheduling gate a pod is created with when its
	// gate gets a token: the pod is not scheduled (so its gate cannot
	// start and use the token) until the Provision that won the create
	// has persisted the token and removed it.
	tokenGate = "stockade.dev/gate-token"
	// tokenWait bounds how long a Provision that found a pod still held
	// by tokenGate waits for its creator to release it, before it takes
	// the creator for dead and makes the pod again.
	tokenWait = 15 * time.Second
	// GateHealBudget bounds how long an Exec or Provision of a gated
	// session waits for the kubelet to restart a gate that died (its
	// restart back-off starts at 10 s) before it fails with ErrGateDown.
	GateHealBudget = time.Minute
	// gateCrashes is how many restarts of a crash-looping gate of an
	// existing pod Provision rides out before it is ErrGateDown; the gate
	// of a pod this call created is ErrGateDown at its first crash.
	gateCrashes = 3
)

// The gate container's requests; its limits are the Docker gate's
// (container.Gate*).
const (
	gateRequestCPUMillis   = 5
	gateRequestMemoryBytes = 16 << 20
	gateStorageBytes       = 1 << 20
)

// gateConfig is Config's gate part, checked.
type gateConfig struct {
	image   string
	uid     int64
	private []netip.Prefix
	hosts   []string // Config.GateExtraHosts
	aliases []corev1.HostAlias
}

// newGateConfig checks cfg's gate settings.
func newGateConfig(cfg Config) (gateConfig, error) {
	g := gateConfig{image: cfg.GateImage, uid: cfg.GateUID}
	if g.image == "" {
		g.image = gate.Image
	}
	if g.uid == 0 {
		g.uid = DefaultGateUID
	}
	if g.uid < 1 || g.uid > 1<<31-2 {
		return g, fmt.Errorf("GateUID %d out of range (1 to 2^31-2)", cfg.GateUID)
	}
	var err error
	if g.private, err = sessiongate.ParsePrivate(cfg.GateAllowPrivate); err != nil {
		return g, err
	}
	if err := sessiongate.CheckExtraHosts(cfg.GateExtraHosts); err != nil {
		return g, err
	}
	g.hosts = append([]string(nil), cfg.GateExtraHosts...)
	g.aliases = hostAliases(g.hosts)
	return g, nil
}

// hostAliases groups "name:address" lines by address, in their order.
func hostAliases(hs []string) []corev1.HostAlias {
	var out []corev1.HostAlias
	at := map[string]int{}
	for _, h := range hs {
		name, addr, _ := strings.Cut(h, ":")
		i, ok := at[addr]
		if !ok {
			i = len(out)
			at[addr] = i
			out = append(out, corev1.HostAlias{IP: addr})
		}
		out[i].Hostnames = append(out[i].Hostnames, name)
	}
	return out
}

// resolveGate fills in r's gate settings and digest, and adds the proxy
// variables to c's environment; c.UID must not be the gate's.
func (p *Provider) resolveGate(r *resolved, c *sandbox.Resolved) error {
	spec := r.spec
	if c.UID == p.gate.uid {
		return fmt.Errorf("kubernetes: %w: RunAsUser %d is the gate's uid (Config.GateUID): the node lets that uid's packets leave the pod", sandbox.ErrInvalidHardening, c.UID)
	}
	st, err := sessiongate.SessionSettings(spec.SessionID, spec.Networking, spec.Gate, false, p.gate.private)
	if err != nil {
		return fmt.Errorf("kubernetes: %w", err)
	}
	st.Listen, st.Control = GateListen, gateControl
	r.gated, r.gateSettings, r.minter = true, st, spec.Gate.TokenMinter
	r.gateImage = cmp0(spec.Gate.Image, p.gate.image)
	r.gateDigest = sessiongate.Digest(r.gateImage, st, p.gate.hosts, "uid="+strconv.FormatInt(p.gate.uid, 10))
	for k, v := range egress.ProxyEnvAt(GateListen) {
		c.Env[k] = v // sandbox.ValidateEnv kept these names out of Spec.Env
	}
	return nil
}

func cmp0(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// addGate adds r's gate to pod: the gate container, its volume, its pids
// annotation, label.GateUID (which tells the node to keep the interface
// and load the rules), the host aliases and the node's resolver. sec is
// the sandbox's security context, which the gate's copies with its own
// uid.
func (p *Provider) addGate(pod *corev1.Pod, r *resolved, sec *corev1.SecurityContext) {
	uid := p.gate.uid
	gsec := sec.DeepCopy()
	gsec.RunAsUser, gsec.RunAsGroup = &uid, &uid
	env := r.gateSettings.Env()
	vars := make([]corev1.EnvVar, 0, len(env))
	for _, k := range sortedKeys(env) {
		vars = append(vars, corev1.EnvVar{Name: k, Value: env[k]})
	}
	q := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.BinarySI) }
	m := func(n int64) resource.Quantity { return *resource.NewMilliQuantity(n, resource.DecimalSI) }
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
		Name: gateContainer, Image: r.gateImage, ImagePullPolicy: corev1.PullNever,
		Env: vars, SecurityContext: gsec, WorkingDir: "/",
		VolumeMounts:             []corev1.VolumeMount{{Name: gateVolume, MountPath: gateControlDir}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		// Started only once the gate answers on its control socket, which
		// it opens after the proxy listens.
		StartupProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{gate.Program, gate.CmdReady}}},
			PeriodSeconds: 1, TimeoutSeconds: int32(egress.CommandTimeout / time.Second), FailureThreshold: int32(egress.ReadyBudget / time.Second),
		},
		Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: m(container.GateNanoCPUs / 1_000_000), corev1.ResourceMemory: q(container.GateMemoryBytes),
				corev1.ResourceEphemeralStorage: q(gateStorageBytes)},
			Requests: corev1.ResourceList{corev1.ResourceCPU: m(gateRequestCPUMillis), corev1.ResourceMemory: q(gateRequestMemoryBytes), corev1.ResourceEphemeralStorage: q(0)},
		},
	})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: gateVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(gateStorageBytes, resource.BinarySI)}}})
	pod.Annotations[PidsAnnotationPrefix+gateContainer] = strconv.Itoa(container.GatePidsLimit)
	pod.Annotations[label.GateUID] = strconv.FormatInt(uid, 10)
	pod.Spec.HostAliases = p.gate.aliases
	// No cluster DNS is assumed: the gate resolves with the node's
	// resolver, which must be reachable from the pod network.
	pod.Spec.DNSPolicy = corev1.DNSDefault
}

// withToken returns a copy of pod whose gate has token and which waits
// for tokenGate before it is scheduled.
func withToken(pod *corev1.Pod, token string) *corev1.Pod {
	pod = pod.DeepCopy()
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != gateContainer {
			continue
		}
		for j := range c.Env {
			if c.Env[j].Name == gate.EnvToken {
				c.Env[j].Value = token
			}
		}
	}
	pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: tokenGate})
	return pod
}

// tokenHeld reports whether pod still waits for tokenGate.
func tokenHeld(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == tokenGate {
			return true
		}
	}
	return false
}

// releaseToken persists the token of the pod this call created and then
// lets the pod be scheduled (removing tokenGate, only from the pod of that
// UID). Until then its gate has not started, so it never uses a token the
// control plane does not know.
func (p *Provider) releaseToken(ctx context.Context, r *resolved, pod *corev1.Pod, token string) (*corev1.Pod, error) {
	if err := r.minter.Persist(ctx, r.spec.SessionID, token); err != nil {
		return pod, fmt.Errorf("kubernetes: persist the gate token of %s: %w", r.spec.SessionID, err)
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(pod.UID)},
		{"op": "remove", "path": "/spec/schedulingGates"},
	})
	if err != nil {
		return pod, err
	}
	p.count()
	got, err := p.cs.CoreV1().Pods(p.ns).Patch(ctx, pod.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return pod, fmt.Errorf("kubernetes: release pod %s for scheduling: %w", pod.Name, err)
	}
	return got, nil
}

// errTokenStuck reports a pod whose creator never released it.
var errTokenStuck = errors.New("the pod's creator never released it")

// waitTokenReleased waits, at most tokenWait, until pod no longer waits
// for tokenGate. A pod that goes meanwhile is (nil, nil): create again.
// One still held after the wait is errTokenStuck: its creator died
// between the create and the release.
func (p *Provider) waitTokenReleased(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	deadline := time.Now().Add(tokenWait)
	for i := 0; tokenHeld(pod); i++ {
		if time.Now().After(deadline) {
			return pod, fmt.Errorf("kubernetes: pod %s held for its gate token for %v: %w", pod.Name, tokenWait, errTokenStuck)
		}
		if err := container.Sleep(ctx, time.Duration(min(i+1, 10))*20*time.Millisecond); err != nil {
			return pod, fmt.Errorf("kubernetes: waiting for pod %s's creator: %w", pod.Name, err)
		}
		p.count()
		got, err := p.cs.CoreV1().Pods(p.ns).Get(ctx, pod.Name, metavGet)
		switch {
		case apierrors.IsNotFound(err), err == nil && got.UID != pod.UID:
			return nil, nil
		case err != nil:
			return pod, fmt.Errorf("kubernetes: get pod %s: %w", pod.Name, err)
		}
		pod = got
	}
	return pod, nil
}

// gateState reports how pod's gate is: up (running and answering), or
// why not; crashes is its restart count.
func gateState(pod *corev1.Pod) (up bool, why string, crashes int32) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != gateContainer {
			continue
		}
		if cs.State.Running != nil && cs.Started != nil && *cs.Started {
			return true, "", cs.RestartCount
		}
		why = "not started"
		if w := cs.State.Waiting; w != nil {
			why = w.Reason
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			why += fmt.Sprintf(" (last exit %d: %s)", t.ExitCode, strings.TrimSpace(t.Message))
		}
		if t := cs.State.Terminated; t != nil {
			why = fmt.Sprintf("exited %d: %s", t.ExitCode, strings.TrimSpace(t.Message))
		}
		return false, why, cs.RestartCount
	}
	return false, "no gate status yet", 0
}

// gated reports whether pod is a gated session's.
func gated(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[label.GateUID]
	return ok
}

// healGate waits until the gate of the gated pod runs and answers (the
// kubelet restarts a gate that died), at most GateHealBudget; then it is
// ErrGateDown.
func (p *Provider) healGate(ctx context.Context, pod *corev1.Pod) error {
	if up, _, _ := gateState(pod); up {
		return nil
	}
	p.log.Warn("waiting for the kubelet to restart a gate", "pod", pod.Name, "phase", "heal")
	hctx, cancel := context.WithTimeout(ctx, GateHealBudget)
	defer cancel()
	for i := 0; ; i++ {
		up, why, _ := gateState(pod)
		if up {
			return nil
		}
		if err := container.Sleep(hctx, time.Duration(min(i+1, 10))*50*time.Millisecond); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("kubernetes: waiting for the gate of %s: %w", pod.Name, ctx.Err())
			}
			return fmt.Errorf("kubernetes: pod %s: the gate is down (%s) after %v: %w", pod.Name, why, GateHealBudget, ErrGateDown)
		}
		p.count()
		got, err := p.cs.CoreV1().Pods(p.ns).Get(ctx, pod.Name, metavGet)
		if err != nil {
			return fmt.Errorf("kubernetes: get pod %s: %w", pod.Name, err)
		}
		if got.UID != pod.UID || got.DeletionTimestamp != nil {
			return fmt.Errorf("kubernetes: pod %s was removed: %w", pod.Name, sandbox.ErrNotFound)
		}
		pod = got
	}
}

// EgressLog returns what session sessionID's gate recorded: every request
// it saw, oldest first (at most gate.DefaultLogRecords, the oldest dropped
// beyond), with its verdict, and how many records were dropped or had a
// field cut to gate.MaxFieldBytes, read with `stockade-gate log` in the
// gate container through pods/exec (the control socket is in no other
// container's reach). A session without a gate is sandbox.ErrNotFound; a
// gate that is not running is ErrGateDown (its record went with it: the
// record lives in the gate's memory).
func (p *Provider) EgressLog(ctx context.Context, sessionID domain.ID) (domain.EgressLog, error) {
	if err := sessionID.Validate(); err != nil {
		return domain.EgressLog{}, fmt.Errorf("kubernetes: %w", err)
	}
	pod, err := p.find(ctx, sessionID)
	if err != nil {
		return domain.EgressLog{}, err
	}
	if !gated(pod) {
		return domain.EgressLog{}, fmt.Errorf("kubernetes: session %s has no gate: %w", sessionID, sandbox.ErrNotFound)
	}
	if up, why, _ := gateState(pod); !up {
		return domain.EgressLog{}, fmt.Errorf("kubernetes: session %s: gate %s: %w", sessionID, why, ErrGateDown)
	}
	// The one way to read a gate's record (egress.ReadLog: `stockade-gate
	// log`, bounded, checked), through this pod's exec engine.
	dump, err := egress.ReadLog(ctx, &execEngine{b: p.box(pod, sessionID)}, gateContainer, pod.Name, p.log)
	if err != nil {
		return domain.EgressLog{}, fmt.Errorf("kubernetes: %w", err)
	}
	return dump, nil
}
