package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	sdocker "github.com/stockade/stockade/sandbox/docker"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// TestGateBench measures the egress gate beside its baseline in one run:
//
//	STOCKADE_BENCH=1 go test ./bench -run TestGateBench -v -timeout 1h
//
// Latency: the p50 of one small GET through the gate (a NetLimited
// session) against the same GET (the same name, resolved by the engine's
// DNS) from an unrestricted session attached straight to the upstream's
// network, timed inside each sandbox in microseconds
// (busybox adjtimex reads the clock), rounds interleaved. Throughput: a
// 100 MiB download each way, the median of 5 interleaved rounds. Scale:
// STOCKADE_BENCH_GATE_SESSIONS (default 200) gated sessions held at once,
// provisioned 4 at a time, with the memory (cgroup v1 memory.usage_in_bytes
// of each container) of a gated session beside an ungated one.
func TestGateBench(t *testing.T) {
	if os.Getenv(EnableEnv) != "1" {
		t.Skipf("set %s=1 to run the benchmarks", EnableEnv)
	}
	c := enginetest.Client(t)
	img := enginetest.BaseImage(t, c)
	owner := enginetest.Owner(t)
	u := enginetest.StartUpstream(t, c, owner)
	cache, err := enginetest.ImageCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	p, err := sdocker.New(sdocker.Config{Owner: owner, GateNetwork: u.Network, GateAllowPrivate: []netip.Prefix{u.Subnet}, GateCacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		ids, _ := p.Owned(ctx)
		parallel(len(ids), 4, func(i int) { p.Reap(ctx, ids[i]) })
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	limited := domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{"allowed.test"}}
	gated, err := p.Provision(ctx, sandbox.Spec{SessionID: "bench-gated", Image: img, Networking: limited, Gate: &sandbox.GateSpec{}})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := p.Provision(ctx, sandbox.Spec{SessionID: "bench-direct", Image: img, Networking: domain.Networking{Type: domain.NetUnrestricted}})
	if err != nil {
		t.Fatal(err)
	}
	// The baseline reaches the upstream's network straight.
	if err := c.NetworkConnect(ctx, u.Network, direct.ID()); err != nil {
		t.Fatal(err)
	}
	// adjtimex's tv_usec holds nanoseconds when the kernel's clock is in
	// nanosecond mode (status bit STA_NANO, 0x2000), as on these machines.
	now := `$(busybox adjtimex | awk '/status:/{st=$2} /tv_sec/{s=$2} /tv_usec/{u=$2} END{if (int(st/8192)%2) u=int(u/1000); printf "%.0f", s*1000000+u}')`
	timed := func(sb sandbox.Sandbox, n int, get string) []time.Duration {
		t.Helper()
		script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do a=%s; %s >/dev/null || exit 1; b=%s; echo $((b-a)); i=$((i+1)); done`, n, now, get, now)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: script, Timeout: 30 * time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("timed requests: %v %+v", err, res)
		}
		var out []time.Duration
		for _, f := range strings.Fields(res.Stdout) {
			us, _ := strconv.ParseInt(f, 10, 64)
			out = append(out, time.Duration(us)*time.Microsecond)
		}
		return out
	}
	const rounds, perRound = 5, 20
	var lg, ld []time.Duration
	for r := 0; r < rounds; r++ {
		lg = append(lg, timed(gated, perRound, "busybox wget -q -O - http://allowed.test:8080/small")...)
		ld = append(ld, timed(direct, perRound, "busybox wget -Y off -q -O - http://allowed.test:8080/small")...)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pg, pd := ms(median(lg)), ms(median(ld))
	// The gate's own time per request, from its record.
	log, err := p.EgressLog(ctx, "bench-gated")
	if err != nil {
		t.Fatal(err)
	}
	var inGate []time.Duration
	for _, r := range log.Records {
		inGate = append(inGate, r.Duration)
	}
	var tg, td []time.Duration
	const size = 100 << 20
	for r := 0; r < 5; r++ {
		tg = append(tg, timed(gated, 1, fmt.Sprintf("busybox wget -q -O - 'http://allowed.test:8080/bytes?n=%d'", size))...)
		td = append(td, timed(direct, 1, fmt.Sprintf("busybox wget -Y off -q -O - 'http://allowed.test:8080/bytes?n=%d'", size))...)
	}
	mg, md := ms(median(tg)), ms(median(td))
	rows := []string{
		"| what | through the gate | direct | delta or ratio | target |",
		"|---|---|---|---|---|",
		fmt.Sprintf("| small GET p50 (%d each) | %.2f ms | %.2f ms | %+.2f ms | ≤ +2 ms |", len(lg), pg, pd, pg-pd),
		fmt.Sprintf("| the same, inside the gate (its record, p50 of %d) | %.2f ms | | | |", len(inGate), ms(median(inGate))),
		fmt.Sprintf("| 100 MiB download (median of 5) | %.0f ms (%.0f MiB/s) | %.0f ms (%.0f MiB/s) | %.0f %% of direct | ≥ 80 %% |", mg, 100/(mg/1000), md, 100/(md/1000), 100*md/mg),
	}

	// Scale: n gated sessions at once.
	n := 200
	if v, err := strconv.Atoi(os.Getenv("STOCKADE_BENCH_GATE_SESSIONS")); err == nil {
		n = v
	}
	start := time.Now()
	errs := make([]error, n)
	parallel(n, 4, func(i int) {
		_, errs[i] = p.Provision(ctx, sandbox.Spec{SessionID: domain.ID(fmt.Sprintf("bench-scale-%03d", i)), Image: img, Networking: limited, Gate: &sandbox.GateSpec{}})
	})
	took := time.Since(start)
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if failed <= 3 {
				t.Logf("scale Provision: %v", err)
			}
		}
	}
	// A sample of them still answers through its gate.
	answering, sampled := 0, 0
	for i := 0; i < n; i += max(1, n/20) {
		sampled++
		sb, err := p.Attach(ctx, domain.ID(fmt.Sprintf("bench-scale-%03d", i)))
		if err != nil {
			continue
		}
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "busybox wget -q -O - http://allowed.test:8080/scale", Timeout: time.Minute})
		if err == nil && strings.Contains(res.Stdout, "path=/scale") {
			answering++
		}
	}
	memG, nG := sessionMemory(t, c, owner, "bench-gated")
	memD, nD := sessionMemory(t, c, owner, "bench-direct")
	rows = append(rows,
		fmt.Sprintf("| %d gated sessions held at once | %d provisioned in %v (%d failed); %d of %d sampled answer through their gates | | | 200 |", n, n-failed, took.Round(time.Second), failed, answering, sampled),
		fmt.Sprintf("| memory of one session after the runs above | %.1f MiB (%d containers) | %.1f MiB (%d containers) | +%.1f MiB | |", memG, nG, memD, nD, memG-memD),
	)
	t.Log("\n" + strings.Join(rows, "\n"))
}

// sessionMemory sums the cgroup v1 memory.usage_in_bytes of session id's
// containers (the sandbox, its keeper and, when gated, its gate), in MiB.
func sessionMemory(t *testing.T, c *dockerapi.Client, owner string, id domain.ID) (mib float64, containers int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.ContainerList(ctx, dockerapi.ListOptions{Filters: dockerapi.LabelsFilter(map[string]string{label.Owner: owner, label.Session: string(id)})})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range cs {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory/docker", x.ID, "memory.usage_in_bytes"))
		if err != nil {
			t.Logf("memory of %s: %v (cgroup v1 layout expected)", x.Names, err)
			continue
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		mib += v / (1 << 20)
		containers++
	}
	return mib, containers
}
