// busybox ssl_client, the sandbox's TLS client in the gate cases, sends no
// signature_algorithms: the test upstream accepts it as TLS 1.2 allows.
//
//go:debug tlssha1=1

package kubernetes

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/sandboxtest"
)

// testBridge is the pod network's bridge scripts/kube-up makes: the host
// is at its address, the gated pods' default route.
const testBridge = "stkube0"

// upstream is the gate cases' outside world on the test cluster: an HTTP
// and a TLS server of this process, listening on the pod network's bridge
// address (the pods reach the host there; nothing else does).
type upstream struct {
	ip             netip.Addr
	httpPort, tlsP int
}

// startUpstream starts the upstream; both servers stop at the test's end.
func startUpstream(t *testing.T) *upstream {
	t.Helper()
	ifc, err := net.InterfaceByName(testBridge)
	if err != nil {
		t.Fatalf("the pod network's bridge %s (scripts/kube-up makes it): %v", testBridge, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			u.ip, _ = netip.AddrFromSlice(n.IP.To4())
			break
		}
	}
	if !u.ip.IsValid() {
		t.Fatalf("bridge %s has no IPv4 address", testBridge)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "path=%s\n", r.URL.Path) })
	serve := func(useTLS bool) int {
		l, err := net.Listen("tcp", netip.AddrPortFrom(u.ip, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		if useTLS {
			l = tls.NewListener(l, rsaTLS(t)) // the sandbox's ssl_client checks no certificate
		}
		s := &http.Server{Handler: h}
		go s.Serve(l)
		t.Cleanup(func() { s.Close() })
		return l.Addr().(*net.TCPAddr).Port
	}
	u.httpPort, u.tlsP = serve(false), serve(true)
	return u
}

// rsaTLS is a server configuration with a self-signed RSA certificate:
// busybox's ssl_client, the sandbox's TLS client, has no ECDSA (httptest's
// own certificate).
func rsaTLS(t *testing.T) *tls.Config {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upstream"}, DNSNames: []string{"allowed.test", "sub.allowed.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// testGateConfig is the provider configuration the gate cases use: the
// upstream's address admitted, the test names pinned for the gates.
func testGateConfig(u *upstream, owner string) Config {
	ip := u.ip.String()
	return Config{
		Kubeconfig: os.Getenv(KubeconfigEnv), Owner: owner, RuntimeClassName: "stockade",
		GateAllowPrivate: []netip.Prefix{netip.PrefixFrom(u.ip, 32)},
		GateExtraHosts: []string{
			"allowed.test:" + ip, "sub.allowed.test:" + ip, "denied.test:" + ip,
			"loop.allowed.test:127.0.0.1",
			"meta.allowed.test:169.254.169.254",
			"private.allowed.test:10.0.0.1", // private, outside the admitted range
		},
	}
}

func (u *upstream) harness() *sandboxtest.GateHarness {
	return &sandboxtest.GateHarness{
		Allowed: "allowed.test", Wildcard: "*.allowed.test", Sub: "sub.allowed.test", Denied: "denied.test",
		Loopback: "loop.allowed.test", Metadata: "meta.allowed.test", Private: "private.allowed.test",
		HTTPPort: u.httpPort, TLSPort: u.tlsP, UpstreamIP: u.ip.String(),
	}
}

// nopMinter mints a fixed token and records nothing.
type nopMinter struct{}

func (nopMinter) Generate() string                                 { return "token" }
func (nopMinter) Persist(context.Context, domain.ID, string) error { return nil }

func TestGatedPodSpec(t *testing.T) {
	p, err := New(Config{Kubeconfig: writeKubeconfig(t), Owner: "o", GateExtraHosts: []string{"a.test:10.1.1.1", "b.test:10.1.1.2", "c.test:10.1.1.1"},
		GateAllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.1.1.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	limited := domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{"Example.com", "*.example.org"}}
	spec := sandbox.Spec{SessionID: "s1", Image: "img", Networking: limited, Gate: &sandbox.GateSpec{TokenMinter: nopMinter{}, ControlplaneURL: "https://cp.example:443"}}
	r, err := p.resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	pod := r.pod
	if len(pod.Spec.Containers) != 3 || pod.Spec.Containers[2].Name != gateContainer {
		t.Fatalf("containers %d; want sandbox, keeper, gate", len(pod.Spec.Containers))
	}
	if pod.Annotations[label.GateUID] != "65532" || pod.Annotations[PidsAnnotationPrefix+gateContainer] == "" {
		t.Errorf("annotations %v", pod.Annotations)
	}
	g := pod.Spec.Containers[2]
	sc := g.SecurityContext
	if *sc.RunAsUser != DefaultGateUID || *sc.RunAsGroup != DefaultGateUID || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("gate security context %+v", sc)
	}
	if *pod.Spec.Containers[0].SecurityContext.RunAsUser == DefaultGateUID {
		t.Errorf("the sandbox runs as the gate's uid")
	}
	env := map[string]string{}
	for _, e := range g.Env {
		env[e.Name] = e.Value
	}
	if env[gate.EnvAllow] != "*.example.org,example.com" || env[gate.EnvListen] != GateListen || env[gate.EnvControl] != gateControl ||
		env[gate.EnvPrivate] != "10.1.1.0/24" || env[gate.EnvSession] != "s1" || env[gate.EnvControlplane] != "https://cp.example:443" {
		t.Errorf("gate environment %v", env)
	}
	if g.StartupProbe == nil || !slices.Equal(g.StartupProbe.Exec.Command, []string{gate.Program, gate.CmdReady}) {
		t.Errorf("gate startup probe %+v", g.StartupProbe)
	}
	if len(g.VolumeMounts) != 1 || g.VolumeMounts[0].MountPath != gateControlDir {
		t.Errorf("gate mounts %+v", g.VolumeMounts)
	}
	for _, c := range pod.Spec.Containers[:2] {
		for _, m := range c.VolumeMounts {
			if m.Name == gateVolume {
				t.Errorf("container %s mounts the gate's control directory", c.Name)
			}
		}
	}
	senv := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		senv[e.Name] = e.Value
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		if senv[k] != "http://"+GateListen {
			t.Errorf("sandbox %s = %q", k, senv[k])
		}
	}
	if c := pod.Spec.Containers[0].Command; len(c) < 6 || c[5] != "1" { // sh -c script stockade-start PIDS GATED PLACES...
		t.Errorf("start.sh is not told the pod is gated: %q", c[3:])
	}
	if len(pod.Spec.HostAliases) != 2 || !slices.Equal(pod.Spec.HostAliases[0].Hostnames, []string{"a.test", "c.test"}) || pod.Spec.HostAliases[1].IP != "10.1.1.2" {
		t.Errorf("host aliases %+v", pod.Spec.HostAliases)
	}
	if pod.Spec.DNSPolicy != corev1.DNSDefault || len(pod.Spec.SchedulingGates) != 0 {
		t.Errorf("dns policy %q, scheduling gates %v", pod.Spec.DNSPolicy, pod.Spec.SchedulingGates)
	}
	// The token goes only into the pod a create sends, which waits for it.
	tp := withToken(pod, "tok")
	if !tokenHeld(tp) || tokenHeld(pod) {
		t.Errorf("withToken: held %v (original %v)", tokenHeld(tp), tokenHeld(pod))
	}
	for _, e := range tp.Spec.Containers[2].Env {
		if e.Name == gate.EnvToken && e.Value != "tok" {
			t.Errorf("token env %q", e.Value)
		}
	}
	// The digest covers the networking and the gate.
	for name, change := range map[string]func(*sandbox.Spec){
		"hosts":        func(s *sandbox.Spec) { s.Networking.AllowedHosts = []string{"example.com"} },
		"controlplane": func(s *sandbox.Spec) { s.Gate = &sandbox.GateSpec{} },
		"gate image": func(s *sandbox.Spec) {
			s.Gate = &sandbox.GateSpec{Image: "other", ControlplaneURL: "https://cp.example:443"}
		},
		"ungated": func(s *sandbox.Spec) { s.Networking, s.Gate = domain.Networking{}, nil },
	} {
		s := spec
		change(&s)
		r2, err := p.resolve(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r2.digest == r.digest {
			t.Errorf("another %s has the same digest", name)
		}
	}
	// Refusals.
	gu := int64(DefaultGateUID)
	for name, tc := range map[string]struct {
		spec sandbox.Spec
		err  error
	}{
		"gate uid":     {sandbox.Spec{SessionID: "s", Image: "i", Networking: limited, Gate: &sandbox.GateSpec{}, Hardening: sandbox.Hardening{RunAsUser: &gu, ReadOnlyRootfs: true}}, sandbox.ErrInvalidHardening},
		"no gate":      {sandbox.Spec{SessionID: "s", Image: "i", Networking: limited}, sandbox.ErrNetworkingUnsupported},
		"unrestricted": {sandbox.Spec{SessionID: "s", Image: "i", Networking: domain.Networking{Type: domain.NetUnrestricted}}, sandbox.ErrNetworkingUnsupported},
		"bad otel":     {sandbox.Spec{SessionID: "s", Image: "i", Networking: limited, Gate: &sandbox.GateSpec{OTelEndpoint: "http://127.0.0.1:4318", OTelInsecure: true}}, sandbox.ErrInvalidGate},
	} {
		if _, err := p.resolve(tc.spec); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v; want %v", name, err, tc.err)
		}
	}
	for name, cfg := range map[string]Config{
		"gate uid":     {GateUID: -1},
		"extra host":   {GateExtraHosts: []string{"nope"}},
		"private":      {GateAllowPrivate: []netip.Prefix{{}}},
		"gate uid big": {GateUID: 1 << 31},
	} {
		cfg.Kubeconfig = writeKubeconfig(t)
		if _, err := New(cfg); err == nil {
			t.Errorf("New with a bad %s succeeded", name)
		}
	}
}

func TestRunningGate(t *testing.T) {
	yes := true
	up := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, Started: &yes}
	crash := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "control plane refused"}}}
	starting := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	pod := func(g corev1.ContainerStatus, restarts int32) *corev1.Pod {
		sb, kp := up, up
		sb.Name, kp.Name, g.Name, g.RestartCount = sandboxContainer, keeperContainer, gateContainer, restarts
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{label.GateUID: "65532"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: sandboxContainer}, {Name: keeperContainer}, {Name: gateContainer}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{sb, kp, g}},
		}
	}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		fresh    bool
		ok, down bool
	}{
		{"up", pod(up, 0), true, true, false},
		{"starting", pod(starting, 0), true, false, false},
		{"crash of a new pod", pod(crash, 1), true, false, true},
		{"killed gate of an old pod restarting", pod(crash, 1), false, false, false},
		{"old pod's gate crash-looping", pod(crash, gateCrashes), false, false, true},
	} {
		ok, err := runningGate(tc.pod, tc.fresh)
		if ok != tc.ok || errors.Is(err, ErrGateDown) != tc.down {
			t.Errorf("%s: runningGate = %v, %v; want %v, gate down %v", tc.name, ok, err, tc.ok, tc.down)
		}
		if ok, err := running(tc.pod); !ok || err != nil {
			t.Errorf("%s: running (sandbox and keeper) = %v, %v", tc.name, ok, err)
		}
	}
}

// TestGateHeals kills a session's gate (from the gate container, as its
// uid) and checks that the next Exec waits for the kubelet's restart and
// goes through the new gate, whose record starts afresh.
func TestGateHeals(t *testing.T) {
	_, owner := cluster(t)
	u := startUpstream(t)
	p, err := New(testGateConfig(u, owner))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	h := u.harness()
	spec := sandbox.Spec{SessionID: "heal", Image: testImage, Networking: domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{h.Allowed}},
		Gate: &sandbox.GateSpec{}}
	sb, err := p.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Reap(context.Background(), spec.SessionID)
	get := fmt.Sprintf("busybox wget -q -O - http://%s:%d/heal", h.Allowed, h.HTTPPort)
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: get, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "path=/heal") {
		t.Fatalf("GET through the gate = %+v, %v", res, err)
	}
	pod, err := p.find(ctx, spec.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	_, _, before := gateState(pod)
	b := p.box(pod, spec.SessionID)
	// kill -1 as the gate's uid: every process of that uid but the
	// caller, which is the gate alone.
	if err := b.stream(ctx, gateContainer, []string{"/bin/sh", "-c", "kill -KILL -1"}, nil, io.Discard, io.Discard); err != nil {
		t.Logf("kill: %v", err)
	}
	if log, err := p.EgressLog(ctx, spec.SessionID); err != nil {
		t.Logf("EgressLog right after the kill: %v (ErrGateDown: %v)", err, errors.Is(err, ErrGateDown))
	} else {
		t.Logf("EgressLog right after the kill: %d records (the kubelet was quicker)", len(log.Records))
	}
	// Until the kubelet notices the death, the gate's status still says
	// running, and requests fail closed (nothing listens on the gate's
	// port); once it shows, Exec waits for the restart.
	for i := 0; ; i++ {
		pod, err := p.find(ctx, spec.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		if up, _, n := gateState(pod); !up || n > before {
			break
		}
		if i > 600 {
			t.Fatal("the kubelet never noticed the gate's death")
		}
		time.Sleep(100 * time.Millisecond)
	}
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Command: get, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "path=/heal") {
		t.Fatalf("GET after the gate was killed = %+v, %v; want it healed", res, err)
	}
	pod, err = p.find(ctx, spec.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, after := gateState(pod); after <= before {
		t.Errorf("the gate's restart count is %d, was %d: it was not killed", after, before)
	}
	log, err := p.EgressLog(ctx, spec.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	recs := log.Records
	if len(recs) != 1 || recs[0].Verdict != domain.EgressAllowed {
		t.Errorf("the healed gate's record %+v; want the one request since", recs)
	}
	// An ungated session has no record.
	if _, err := p.EgressLog(ctx, "no-such-session"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("EgressLog of no session = %v; want ErrNotFound", err)
	}
}
