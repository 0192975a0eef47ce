package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/kubernetes"
)

// TestKube measures the Kubernetes backend against kubectl on the same
// cluster, side by side, rounds interleaved:
//
//	KC=$(scripts/kube-up)
//	STOCKADE_BENCH=1 STOCKADE_KUBECONFIG=$KC go test ./bench -run TestKube -v -timeout 30m
//
// Rows: Provision to the first Exec's result (backend) against `kubectl
// run` of the same pod spec's image with --command sleep, `kubectl wait
// --for=condition=Ready` and `kubectl exec -- true`; Exec `true` against
// `kubectl exec -- true` in a running pod. kubectl is the one scripts/kube-up
// built (STOCKADE_KUBECTL, default: kubectl on PATH). Rounds:
// STOCKADE_BENCH_ROUNDS (default 5).
func TestKube(t *testing.T) {
	if os.Getenv(EnableEnv) != "1" {
		t.Skipf("set %s=1 to run the benchmarks", EnableEnv)
	}
	kc := os.Getenv("STOCKADE_KUBECONFIG")
	if kc == "" {
		t.Skip("set STOCKADE_KUBECONFIG (scripts/kube-up prints it)")
	}
	kubectl := os.Getenv("STOCKADE_KUBECTL")
	if kubectl == "" {
		kubectl = "kubectl"
	}
	rounds := envInt("STOCKADE_BENCH_ROUNDS", 5)
	p, err := kubernetes.New(kubernetes.Config{Kubeconfig: kc, Owner: "bench-" + strconv.FormatInt(time.Now().Unix(), 10), RuntimeClassName: "stockade"})
	if err != nil {
		t.Fatal(err)
	}
	ns := p.Namespace()
	k := func(ctx context.Context, args ...string) error {
		out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kc, "-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// kubectl's pod: the restricted profile's minimum, the same image.
	overrides := `{"spec":{"automountServiceAccountToken":false,"securityContext":{"runAsNonRoot":true,"runAsUser":65534,"seccompProfile":{"type":"RuntimeDefault"}},` +
		`"containers":[{"name":"c","image":"stockade/base:local","imagePullPolicy":"Never","command":["sleep","3600"],` +
		`"securityContext":{"allowPrivilegeEscalation":false,"readOnlyRootFilesystem":true,"capabilities":{"drop":["ALL"]}}}]}}`
	var provOurs, provKubectl, execOurs, execKubectl []time.Duration
	for i := 0; i < rounds; i++ {
		id := domain.ID(fmt.Sprintf("bench-%d", i))
		t0 := time.Now()
		sb, err := p.Provision(ctx, sandbox.Spec{SessionID: id, Image: "stockade/base:local"})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
			t.Fatalf("first Exec: %+v, %v", res, err)
		}
		provOurs = append(provOurs, time.Since(t0))

		pod := fmt.Sprintf("kubectl-bench-%d", i)
		t0 = time.Now()
		if err := k(ctx, "run", pod, "--image=stockade/base:local", "--restart=Never", "--overrides="+overrides); err != nil {
			t.Fatal(err)
		}
		if err := k(ctx, "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=120s"); err != nil {
			t.Fatal(err)
		}
		if err := k(ctx, "exec", pod, "--", "true"); err != nil {
			t.Fatal(err)
		}
		provKubectl = append(provKubectl, time.Since(t0))

		for j := 0; j < 5; j++ {
			t0 = time.Now()
			if res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
				t.Fatalf("Exec: %+v, %v", res, err)
			}
			execOurs = append(execOurs, time.Since(t0))
			t0 = time.Now()
			if err := k(ctx, "exec", pod, "--", "true"); err != nil {
				t.Fatal(err)
			}
			execKubectl = append(execKubectl, time.Since(t0))
		}
		if err := p.Reap(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := k(ctx, "delete", "pod", pod, "--grace-period=1", "--wait=true"); err != nil {
			t.Fatal(err)
		}
	}
	var tb table
	tb.b.WriteString("| Kubernetes (same cluster, same run) | backend | kubectl | ratio |\n|---|---|---|---|\n")
	fmt.Fprintf(&tb.b, "| Provision → first Exec vs run + wait Ready + exec | %s | %s | %s |\n", ms(median(provOurs)), ms(median(provKubectl)), ratio(median(provOurs), median(provKubectl)))
	fmt.Fprintf(&tb.b, "| Exec `true` vs kubectl exec | %s | %s | %s |\n", ms(median(execOurs)), ms(median(execKubectl)), ratio(median(execOurs), median(execKubectl)))
	t.Logf("rounds %d\n%s", rounds, tb.b.String())
}
