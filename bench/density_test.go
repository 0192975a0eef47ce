package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	sdocker "github.com/stockade/stockade/sandbox/docker"
	"github.com/stockade/stockade/sandbox/dockerapi"
	"github.com/stockade/stockade/sandbox/kubernetes"
)

// TestDensity fills one engine (or one Kubernetes node) with idle sessions
// and measures what they cost, through the sandbox.Provider API only, so
// the same program measures both backends:
//
//	STOCKADE_BENCH=1 go test ./bench -run TestDensity -v -timeout 2h
//	STOCKADE_BENCH=1 STOCKADE_KUBECONFIG=$(scripts/kube-up) go test ./bench -run TestDensity -v -timeout 2h
//
// Settings: STOCKADE_DENSITY_SESSIONS (default 2000 on Docker, 240 on
// Kubernetes, under scripts/kube-up's maxPods of 250) idle sessions,
// provisioned STOCKADE_DENSITY_CONCURRENCY (default 8) at a time. The
// fill stops at the first failed Provision and reports how many were held.
//
// Rows: provisions a second during the fill (Provision calls only, wall
// clock); the host's memory per idle session (the drop of MemAvailable in
// /proc/meminfo from before the fill to after it, divided by the sessions
// held: everything a session costs the machine, engine and shims
// included); Exec `true` p50 on one probe session before the fill against
// the same probe with every session idle (the ratio is the row's point);
// Reap rate of the teardown.
func TestDensity(t *testing.T) {
	if os.Getenv(EnableEnv) != "1" {
		t.Skipf("set %s=1 to run the benchmarks", EnableEnv)
	}
	var (
		p       sandbox.Provider
		img     = image.BaseTag
		backend string
		n       int
	)
	owner := "bench-density-" + strconv.FormatInt(time.Now().Unix(), 10)
	if kc := os.Getenv("STOCKADE_KUBECONFIG"); kc != "" {
		kp, err := kubernetes.New(kubernetes.Config{Kubeconfig: kc, Owner: owner, RuntimeClassName: "stockade"})
		if err != nil {
			t.Fatal(err)
		}
		p, backend, n = kp, "kubernetes", envInt("STOCKADE_DENSITY_SESSIONS", 240)
	} else {
		c := enginetest.Client(t)
		img = enginetest.BaseImage(t, c)
		owner = enginetest.Owner(t)
		dp, err := sdocker.New(sdocker.Config{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		p, backend, n = dp, "docker", envInt("STOCKADE_DENSITY_SESSIONS", 2000)
	}
	conc := envInt("STOCKADE_DENSITY_CONCURRENCY", 8)
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Minute)
	defer cancel()

	// Teardown always runs, on its own budget, and is measured.
	var reapRate float64
	var reapErrs atomic.Int64
	reapAll := func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 40*time.Minute)
		defer rcancel()
		ids, err := p.Owned(rctx)
		if err != nil {
			t.Errorf("Owned: %v", err)
			return
		}
		t0 := time.Now()
		parallel(len(ids), conc, func(i int) {
			if err := p.Reap(rctx, ids[i]); err != nil {
				reapErrs.Add(1)
			}
		})
		if len(ids) > 0 {
			reapRate = float64(len(ids)) / time.Since(t0).Seconds()
		}
	}
	t.Cleanup(reapAll)

	execP50 := func(sb sandbox.Sandbox, rounds int) time.Duration {
		ds := make([]time.Duration, 0, rounds)
		for range rounds {
			t0 := time.Now()
			r, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"})
			if err != nil || r.ExitCode != 0 {
				t.Fatalf("probe Exec: %+v, %v", r, err)
			}
			ds = append(ds, time.Since(t0))
		}
		return median(ds)
	}

	probe, err := p.Provision(ctx, sandbox.Spec{SessionID: "probe", Image: img})
	if err != nil {
		t.Fatal(err)
	}
	execP50(probe, 3) // warm the path
	before := execP50(probe, 21)
	memBefore, cgBefore, shimBefore := memAvailable(t), cgroupBytes(t, backend, owner), shimPSS()

	var held atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var stop atomic.Bool
	t0 := time.Now()
	parallel(n, conc, func(i int) {
		if stop.Load() {
			return
		}
		_, err := p.Provision(ctx, sandbox.Spec{SessionID: domain.ID(fmt.Sprintf("idle-%05d", i)), Image: img})
		if err != nil {
			errOnce.Do(func() { firstErr = err })
			stop.Store(true)
			return
		}
		held.Add(1)
	})
	fill := time.Since(t0)
	time.Sleep(10 * time.Second) // let the engine settle before reading memory
	memAfter, cgAfter, shimAfter := memAvailable(t), cgroupBytes(t, backend, owner), shimPSS()
	after := execP50(probe, 21)

	h := held.Load()
	per := func(d int64) float64 {
		if h == 0 {
			return 0
		}
		return float64(d) / float64(h) / (1 << 20)
	}
	reapAll()
	var tb table
	tb.b.WriteString(fmt.Sprintf("| density, %s backend, concurrency %d | figure |\n|---|---|\n", backend, conc))
	fmt.Fprintf(&tb.b, "| idle sessions held | %d of %d asked |\n", h, n)
	if firstErr != nil {
		fmt.Fprintf(&tb.b, "| first failure | %s |\n", strings.ReplaceAll(firstErr.Error(), "|", "/"))
	}
	fmt.Fprintf(&tb.b, "| provisions a second (fill) | %.1f (%d in %v) |\n", float64(h)/fill.Seconds(), h, fill.Round(time.Second))
	fmt.Fprintf(&tb.b, "| memory per idle session: its cgroups | %.2f MiB |\n", per(cgAfter-cgBefore))
	fmt.Fprintf(&tb.b, "| memory per idle session: containerd shims (PSS) | %.2f MiB |\n", per(shimAfter-shimBefore))
	fmt.Fprintf(&tb.b, "| memory per idle session: host MemAvailable drop (noisy on a busy machine) | %.2f MiB |\n", per(memBefore-memAfter))
	fmt.Fprintf(&tb.b, "| Exec `true` p50, alone → all idle | %s → %s (%s) |\n", ms(before), ms(after), ratio(after, before))
	fmt.Fprintf(&tb.b, "| Reaps a second (teardown) | %.1f (%d failed) |\n", reapRate, reapErrs.Load())
	t.Logf("load %s\n%s", loadAvg(), tb.String())
	if firstErr != nil && !errors.Is(firstErr, context.DeadlineExceeded) {
		t.Logf("fill stopped: %v", firstErr)
	}
}

// parallel runs f(0..n-1) with at most conc calls at once.
func parallel(n, conc int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, conc)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

// memAvailable is MemAvailable of /proc/meminfo, in bytes.
func memAvailable(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no MemAvailable in /proc/meminfo")
	return 0
}

// cgroupBytes sums the cgroup v1 memory.usage_in_bytes of what the
// backend runs for owner's sessions: on Docker the owner's containers
// (their cgroups under /sys/fs/cgroup/memory/docker, the cgroupfs layout of
// these machines), on Kubernetes every pod cgroup of the node (the test
// cluster runs only the benchmark's pods).
func cgroupBytes(t *testing.T, backend, owner string) int64 {
	t.Helper()
	var dirs []string
	switch backend {
	case "docker":
		c := enginetest.Client(t)
		cs, err := c.ContainerList(context.Background(), dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(map[string]string{label.Owner: owner})})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range cs {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup/memory/docker", x.ID))
		}
	default:
		filepath.WalkDir("/sys/fs/cgroup/memory/kubepods", func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), "pod") {
				dirs = append(dirs, path)
				return filepath.SkipDir
			}
			return nil
		})
	}
	var sum int64
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "memory.usage_in_bytes"))
		if err != nil {
			continue // gone, or not a cgroup v1 host: the row reads 0
		}
		v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		sum += v
	}
	return sum
}

// shimPSS sums the proportional set size (Pss of smaps_rollup: shared
// pages divided among the processes sharing them) of every containerd shim
// process, in bytes: the engine side of each container, outside its
// cgroup.
func shimPSS() int64 {
	ents, _ := os.ReadDir("/proc")
	var sum int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || !strings.HasPrefix(string(comm), "containerd-shim") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "smaps_rollup"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "Pss:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				sum += kb << 10
			}
		}
	}
	return sum
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	fs := strings.Fields(string(b))
	return strings.Join(fs[:min(3, len(fs))], " ")
}
