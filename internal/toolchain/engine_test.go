package toolchain

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/internal/egress"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/internal/modproxy"
	"github.com/stockade/stockade/internal/programs"
	"github.com/stockade/stockade/sandbox/dockerapi"
	"golang.org/x/mod/module"
)

// Engine tests: each proves one of the seed's guarantees against the real
// engine. They use the busybox-only base image (fast) unless they need Go.

var (
	imgOnce   sync.Map // image.Options key -> *imgResult
	helperBin struct {
		once sync.Once
		path string
		err  error
	}
)

type imgResult struct {
	once sync.Once
	id   string
	err  error
}

func testImage(t *testing.T, eng *dockerapi.Client, withGo bool) string {
	t.Helper()
	v, _ := imgOnce.LoadOrStore(withGo, &imgResult{})
	r := v.(*imgResult)
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cache, err := enginetest.ImageCacheDir()
		if err != nil {
			r.err = err
			return
		}
		res, err := image.Build(ctx, eng, image.Options{NoGo: !withGo, CacheDir: cache})
		r.id, r.err = res.ID, err
	})
	if r.err != nil {
		t.Fatalf("build test image: %v", r.err)
	}
	return r.id
}

var gateImg struct {
	once sync.Once
	id   string
	err  error
}

// gateImage builds the egress gate's image (image.BuildGate) once per test
// process, for tests that must build it before they change the host's
// environment.
func gateImage(t *testing.T, eng *dockerapi.Client) string {
	t.Helper()
	gateImg.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cache, err := enginetest.ImageCacheDir()
		if err != nil {
			gateImg.err = err
			return
		}
		res, err := image.BuildGate(ctx, eng, image.Options{CacheDir: cache})
		gateImg.id, gateImg.err = res.ID, err
	})
	if gateImg.err != nil {
		t.Fatalf("build the gate image: %v", gateImg.err)
	}
	return gateImg.id
}

// testDataDir returns a data directory under the home directory (so a
// VM-backed engine can see it), removed at the end of the test.
func testDataDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("HOME")
	if base == "" {
		base = os.TempDir()
	}
	base = filepath.Join(base, ".cache", "stockade-test")
	if err := os.MkdirAll(base, 0o700); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, "data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeHost(dir) })
	return filepath.Join(dir, "d")
}

// quickBudgets keep engine tests from hanging on a broken engine.
var quickBudgets = container.Budgets{Create: 20 * time.Second, Start: 20 * time.Second, Kill: 10 * time.Second, Logs: 20 * time.Second, Remove: 20 * time.Second}

func openRunner(t *testing.T, eng *dockerapi.Client, img string, mod func(*Options)) *Runner {
	t.Helper()
	o := Options{
		DataDir: testDataDir(t),
		Owner:   enginetest.Owner(t),
		Config:  Config{Image: img, Timeout: 30 * time.Second, Limits: container.Limits{MemoryBytes: 512 << 20}},
		Budgets: quickBudgets,
	}
	if mod != nil {
		mod(&o)
	}
	ctx := context.Background()
	r, err := Open(ctx, eng, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// sourceDir makes a user's source directory with files name -> content.
func sourceDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		write(t, filepath.Join(dir, name), content, 0o644)
	}
	return dir
}

func mustProbe(t *testing.T, r *Runner) {
	t.Helper()
	if err := r.Probe(context.Background()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
}

func sh(script string) []string { return []string{"sh", "-c", script} }

func mustRun(t *testing.T, r *Runner, j Job) Result {
	t.Helper()
	res, err := r.Run(context.Background(), j)
	if err != nil {
		t.Fatalf("Run(%s %v): %v", j.Profile, j.Cmd, err)
	}
	return res
}

func netHelper(t *testing.T) string {
	t.Helper()
	helperBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "nethelper-")
		if err != nil {
			helperBin.err = err
			return
		}
		helperBin.path = filepath.Join(dir, "nethelper")
		cmd := exec.Command("go", "build", "-trimpath", "-o", helperBin.path, "./testdata/nethelper")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			helperBin.err = errors.New(string(out))
		}
	})
	if helperBin.err != nil {
		t.Fatalf("build nethelper: %v", helperBin.err)
	}
	return helperBin.path
}

// TestExecute_NoNetwork: execute has no interface but loopback; a dial and
// a name lookup fail. Acquire, by contrast, has the bridge.
func TestExecute_NoNetwork(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	executeNoNetwork(t, openRunner(t, eng, testImage(t, eng, false), nil))
}

// executeNoNetwork is TestExecute_NoNetwork on runner r.
func executeNoNetwork(t *testing.T, r *Runner) {
	src := t.TempDir()
	b, err := os.ReadFile(netHelper(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(src, "nethelper"), string(b), 0o755)
	snap, err := r.Snapshot(context.Background(), src, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bc, _ := r.NewBuildCache()
	mustProbe(t, r)
	res := mustRun(t, r, Job{Profile: Execute, Source: snap.Dir, BuildCache: bc, Cmd: []string{"/src/nethelper"}})
	if res.ExitCode != 0 {
		t.Errorf("execute reached the network (exit %d):\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if out := string(res.Stdout); !strings.Contains(out, "interface: lo") || strings.Count(out, "interface:") != 1 {
		t.Errorf("execute interfaces:\n%s", out)
	}
	res = mustRun(t, r, Job{Profile: Execute, BuildCache: bc, Cmd: []string{"cat", "/proc/net/dev"}})
	if devs := netDevs(string(res.Stdout)); !slices.Equal(devs, []string{"lo"}) {
		t.Errorf("execute /proc/net/dev devices = %v; want [lo]", devs)
	}
	res = mustRun(t, r, Job{Profile: Acquire, Source: snap.Dir, Cmd: []string{"cat", "/proc/net/dev"}, anyCmd: true})
	if devs := netDevs(string(res.Stdout)); !slices.Contains(devs, "eth0") {
		t.Errorf("acquire devices = %v; want the bridge's eth0", devs)
	}
}

// TestExecute_Loopback: execute has no network, but loopback works as on
// a host: localhost resolves, and listeners on 127.0.0.1, ::1, 0.0.0.0
// and the unspecified address are reached through it and the literal
// addresses (tests of published modules dial httptest servers so).
func TestExecute_Loopback(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	r := openRunner(t, eng, testImage(t, eng, false), nil)
	src := t.TempDir()
	b, err := os.ReadFile(netHelper(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(src, "nethelper"), string(b), 0o755)
	snap, err := r.Snapshot(context.Background(), src, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bc, _ := r.NewBuildCache()
	mustProbe(t, r)
	res := mustRun(t, r, Job{Profile: Execute, Source: snap.Dir, BuildCache: bc, Cmd: []string{"/src/nethelper", "loopback"}})
	if res.ExitCode != 0 {
		t.Errorf("loopback in execute (exit %d):\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

func netDevs(procNetDev string) []string {
	var devs []string
	for _, l := range strings.Split(procNetDev, "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok && !strings.Contains(name, "|") {
			devs = append(devs, strings.TrimSpace(name))
		}
	}
	slices.Sort(devs)
	return devs
}

// TestExecute_SourceAndCacheReadOnly: in execute, writes to the source and
// the module cache fail; the build cache and an exec-enabled /tmp work.
// Acquire may write the module cache but not the source.
func TestExecute_SourceAndCacheReadOnly(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	executeReadOnly(t, openRunner(t, eng, testImage(t, eng, false), nil))
}

// executeReadOnly is TestExecute_SourceAndCacheReadOnly on runner r.
func executeReadOnly(t *testing.T, r *Runner) {
	snap, err := r.Snapshot(context.Background(), sourceDir(t, map[string]string{"go.mod": "module m\n"}), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bc, _ := r.NewBuildCache()
	mustProbe(t, r)
	try := `for p in /src/x /src/go.mod /modcache/x /gocache/x /tmp/x /x; do if (echo hi >> $p) 2>/dev/null; then echo "$p writable"; else echo "$p read-only"; fi; done
printf '#!/bin/sh\necho ran\n' > /tmp/t.sh && chmod +x /tmp/t.sh && /tmp/t.sh`
	res := mustRun(t, r, Job{Profile: Execute, Source: snap.Dir, BuildCache: bc, Cmd: sh(try)})
	want := "/src/x read-only\n/src/go.mod read-only\n/modcache/x read-only\n/gocache/x writable\n/tmp/x writable\n/x read-only\nran\n"
	if got := string(res.Stdout); got != want {
		t.Errorf("execute:\n%s\nwant\n%s(stderr %s)", got, want, res.Stderr)
	}
	res = mustRun(t, r, Job{Profile: Acquire, Source: snap.Dir, Cmd: sh(try), anyCmd: true})
	want = "/src/x read-only\n/src/go.mod read-only\n/modcache/x writable\n/gocache/x writable\n/tmp/x writable\n/x read-only\nran\n"
	if got := string(res.Stdout); got != want {
		t.Errorf("acquire:\n%s\nwant\n%s", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(snap.Dir, "go.mod")); string(b) != "module m\n" {
		t.Errorf("snapshot changed: %q", b)
	}
}

// TestEnv_FromScratchInEveryProfile: a host variable never reaches a
// container; each profile's environment is exactly what Env lists, plus
// what the image and the engine set.
func TestEnv_FromScratchInEveryProfile(t *testing.T) {
	eng := enginetest.Client(t)
	gimg := gateImage(t, eng) // with the host's own GOFLAGS
	t.Setenv("STOCKADE_TEST_TOKEN", "secret")
	t.Setenv("GOFLAGS", "-mod=vendor")
	img := testImage(t, eng, false)
	r := openRunner(t, eng, img, func(o *Options) { o.Config.GateImage = gimg })
	snap, _ := r.Snapshot(context.Background(), sourceDir(t, map[string]string{"go.mod": "module m\n"}), SnapshotOptions{})
	st, _ := r.NewStaging(snap)
	bc, _ := r.NewBuildCache()
	td, _ := r.NewToolDirs()
	mustProbe(t, r)
	imgEnv := map[string]bool{"HOSTNAME": true}
	if info, err := eng.ImageInspect(context.Background(), img); err == nil {
		for _, kv := range info.Config.Env {
			k, _, _ := strings.Cut(kv, "=")
			imgEnv[k] = true
		}
	}
	for _, j := range []Job{
		{Profile: Acquire, Source: snap.Dir},
		{Profile: Mutate, Source: snap.Dir, Staging: st},
		{Profile: Execute, Source: snap.Dir, BuildCache: bc},
		{Profile: Tool, ModCache: td.ModCache, BuildCache: td.BuildCache, Tools: td.Bin},
	} {
		j.Cmd, j.anyCmd = []string{"env"}, true
		res := mustRun(t, r, j)
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
			k, v, _ := strings.Cut(l, "=")
			got[k] = v
		}
		if strings.Contains(string(res.Stdout), "secret") {
			t.Errorf("%s: the host's token leaked:\n%s", j.Profile, res.Stdout)
		}
		want := Env(j.Profile, r.Config())
		maps.Copy(want, defaults.Env())
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s=%q; want %q", j.Profile, k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok && !imgEnv[k] {
				t.Errorf("%s: unexpected variable %s=%q", j.Profile, k, got[k])
			}
		}
	}
}

// TestRun_TimeoutKillsAndRemoves: a command past its timeout is killed by
// the in-container timeout, reported TimedOut, and its container removed.
func TestRun_TimeoutKillsAndRemoves(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	r := openRunner(t, eng, testImage(t, eng, false), nil)
	bc, _ := r.NewBuildCache()
	mustProbe(t, r)
	start := time.Now()
	res := mustRun(t, r, Job{Profile: Execute, BuildCache: bc, Timeout: 5 * time.Second, Cmd: sh("echo started; sleep 60")})
	if !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("TimedOut = %v, exit %d; want true, 137", res.TimedOut, res.ExitCode)
	}
	if d := time.Since(start); d > 5*time.Second+HostGrace {
		t.Errorf("took %v; the in-container timeout should fire at 5s", d)
	}
	if string(res.Stdout) != "started\n" {
		t.Errorf("stdout = %q; want the output before the kill", res.Stdout)
	}
	if _, err := eng.ContainerInspect(context.Background(), res.ContainerID); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("container still there after timeout: %v", err)
	}
}

// TestRun_OutputCapFlagsTruncation: output past the cap is counted, not
// kept, and flagged.
func TestRun_OutputCapFlagsTruncation(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	r := openRunner(t, eng, testImage(t, eng, false), func(o *Options) { o.Config.OutputCap = 1000 })
	bc, _ := r.NewBuildCache()
	mustProbe(t, r)
	res := mustRun(t, r, Job{Profile: Execute, BuildCache: bc, Cmd: sh("yes | head -c 1000000; echo err >&2")})
	if !res.StdoutTruncated || res.StderrTruncated || len(res.Stdout) != 1000 || res.StdoutBytes != 1000000 || !res.Truncated() {
		t.Errorf("truncated %v/%v, kept %d of %d bytes; want stdout flagged, 1000 of 1000000", res.StdoutTruncated, res.StderrTruncated, len(res.Stdout), res.StdoutBytes)
	}
	if string(res.Stderr) != "err\n" {
		t.Errorf("stderr = %q", res.Stderr)
	}
}

// TestRun_OutOfMemoryIsData: a command killed for memory is a result with
// OOMKilled set, not a timeout and not an error, in both modes.
func TestRun_OutOfMemoryIsData(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	r := openRunner(t, eng, testImage(t, eng, false), func(o *Options) { o.Config.Limits.MemoryBytes = 64 << 20 })
	mustProbe(t, r)
	hog := sh(`awk 'BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }'`)
	res := mustRun(t, r, Job{Profile: Execute, BuildCache: mustCache(t, r), Cmd: hog})
	if !res.OOMKilled || res.TimedOut || res.ExitCode != 137 {
		t.Errorf("one-shot: OOMKilled %v TimedOut %v exit %d; want true false 137", res.OOMKilled, res.TimedOut, res.ExitCode)
	}
	ctx := context.Background()
	c, err := r.Start(ctx, Job{Profile: Execute, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	res, err = c.Exec(ctx, hog, ExecOptions{})
	if err != nil || !res.OOMKilled || res.TimedOut || res.ExitCode != 137 {
		t.Errorf("exec: OOMKilled %v TimedOut %v exit %d, %v; want true false 137", res.OOMKilled, res.TimedOut, res.ExitCode, err)
	}
}

// TestRun_LongCommandStillCollectsLogsAndRemoves: each post-run engine call
// has its own budget, so a command longer than every single budget still
// has its logs read and its container removed.
func TestRun_LongCommandStillCollectsLogsAndRemoves(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	const budget = 1500 * time.Millisecond
	r := openRunner(t, eng, testImage(t, eng, false), func(o *Options) {
		o.Budgets = container.Budgets{Create: 10 * time.Second, Start: 10 * time.Second, Kill: budget, Logs: budget, Remove: budget}
	})
	bc, _ := r.NewBuildCache()
	mustProbe(t, r)
	res := mustRun(t, r, Job{Profile: Execute, BuildCache: bc, Cmd: sh("echo before; sleep 4; echo after; echo e >&2")})
	if res.Phases.Wait < 3*budget/2 {
		t.Fatalf("command ran %v; want longer than the budgets", res.Phases.Wait)
	}
	if string(res.Stdout) != "before\nafter\n" || string(res.Stderr) != "e\n" || res.ExitCode != 0 {
		t.Errorf("stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	if _, err := eng.ContainerInspect(context.Background(), res.ContainerID); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("container not removed: %v", err)
	}
}

// crash makes r's run look as a crashed process leaves it: its lock
// released (the kernel's doing when a process dies), nothing cleaned up.
func crash(r *Runner) { r.runLock.Unlock() }

// TestReap_RemovesOrphansOfCrashedRunsOnly: a container a crashed run left
// (kept) is reaped by the next run on the same data directory; one of a
// live run on it, and one labelled with another data directory, survive.
func TestReap_RemovesOrphansOfCrashedRunsOnly(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	img := testImage(t, eng, false)
	ctx := context.Background()
	keep := func(r *Runner) string {
		t.Helper()
		bc, _ := r.NewBuildCache()
		mustProbe(t, r)
		res, err := r.run(ctx, Job{Profile: Execute, BuildCache: bc, Cmd: []string{"true"}}, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.ContainerRemove(ctx, res.ContainerID, dockerapi.RemoveOptions{Force: true}) })
		return res.ContainerID
	}
	crashed := openRunner(t, eng, img, nil)
	orphan := keep(crashed)
	crash(crashed)
	live, err := Open(ctx, eng, Options{DataDir: crashed.DataDir(), Owner: "someone-else", Config: Config{Image: img}})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close(ctx)
	livesOn := keep(live)
	// A container of another data directory, made the same way.
	other := openRunner(t, eng, img, nil)
	survivor := keep(other)
	crash(other)

	// Open reaped the crashed run's container; Reap finds nothing more.
	if _, err := eng.ContainerInspect(ctx, orphan); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("the crashed run's container survived the next Open: %v", err)
	}
	if n, err := Reap(ctx, eng, crashed.DataDir()); err != nil || n != 0 {
		t.Errorf("Reap = %d, %v; want 0 removed (the live run's stays)", n, err)
	}
	if _, err := eng.ContainerInspect(ctx, livesOn); err != nil {
		t.Errorf("a live run's container was reaped: %v", err)
	}
	c, err := eng.ContainerInspect(ctx, survivor)
	if err != nil {
		t.Fatalf("another data directory's container was reaped: %v", err)
	}
	if c.Config.Labels[label.DataDir] != other.Config().DataDirID {
		t.Errorf("labels %v", c.Config.Labels)
	}
	if _, err := os.Stat(crashed.runDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the crashed run's directory is still there (%v)", err)
	}
	if _, err := os.Stat(live.runDir); err != nil {
		t.Errorf("the live run's directory: %v", err)
	}
	// A crashed run on the other data directory is reaped by the next
	// Open there.
	next, err := Open(ctx, eng, Options{DataDir: other.DataDir(), Owner: "someone-else", Config: Config{Image: img}})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close(ctx)
	if _, err := eng.ContainerInspect(ctx, survivor); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("Open did not reap the crashed run's container: %v", err)
	}
}

// TestOpen_RunsSideBySide: runs on one data directory go on side by side
// (each holds its own run's lock, not the directory's); a run starting
// while the directory's lock is held (a reap, another run starting) waits
// with a message naming the holder and refuses after its lock timeout.
func TestOpen_RunsSideBySide(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	img := testImage(t, eng, false)
	ctx := context.Background()
	r := openRunner(t, eng, img, nil)
	second, err := Open(ctx, eng, Options{DataDir: r.DataDir(), Config: Config{Image: img}, LockTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("a second run on the data directory = %v; want it to open beside the first", err)
	}
	defer second.Close(ctx)
	for _, x := range []*Runner{r, second} {
		mustProbe(t, x)
		if res := mustRun(t, x, Job{Profile: Execute, BuildCache: mustCache(t, x), Cmd: []string{"true"}}); res.ExitCode != 0 {
			t.Errorf("run %s: exit %d", x.RunID(), res.ExitCode)
		}
	}
	lock, err := LockDataDir(ctx, r.DataDir(), 0, "reap", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	var msg string
	_, err = Open(ctx, eng, Options{DataDir: r.DataDir(), Config: Config{Image: img}, LockTimeout: 300 * time.Millisecond, OnLockWait: func(h string) { msg = h }})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while the directory's lock is held = %v; want ErrLocked", err)
	}
	if !strings.Contains(msg, "reap") {
		t.Errorf("wait message %q does not name the holder", msg)
	}
	if fi, err := os.Stat(r.DataDir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %v (%v); want 0700", fi.Mode().Perm(), err)
	}
}

// TestRun_RefusesBeforeProbeAndForeignDirs: nothing runs before the probe,
// and a job may mount only directories the run made for that role.
func TestRun_RefusesBeforeProbeAndForeignDirs(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	r := openRunner(t, eng, testImage(t, eng, false), nil)
	bc, _ := r.NewBuildCache()
	ctx := context.Background()
	if _, err := r.Run(ctx, Job{Profile: Execute, BuildCache: bc, Cmd: []string{"true"}}); !errors.Is(err, ErrNotProbed) {
		t.Errorf("Run before Probe = %v; want ErrNotProbed", err)
	}
	mustProbe(t, r)
	user := t.TempDir()
	for _, tt := range []struct {
		j    Job
		want error
	}{
		{Job{Profile: Execute, Cmd: []string{"true"}}, ErrNoBuildCache},
		{Job{Profile: Execute, BuildCache: r.modBuild, Cmd: []string{"true"}}, ErrNoBuildCache},
		{Job{Profile: Execute, BuildCache: bc, Source: user, Cmd: []string{"true"}}, ErrNotOwned},
		{Job{Profile: Acquire, BuildCache: bc, Cmd: []string{"true"}}, ErrNotOwned},
		{Job{Profile: Tool, ModCache: r.ModCache(), BuildCache: bc, Tools: user, Cmd: []string{"true"}}, ErrNotOwned},
	} {
		if _, err := r.Run(ctx, tt.j); !errors.Is(err, tt.want) {
			t.Errorf("Run(%s, build %s, source %s) = %v; want %v", tt.j.Profile, tt.j.BuildCache, tt.j.Source, err, tt.want)
		}
	}
}

// TestExecute_ToolsAndVulnDBReadOnly: with a scan configured, execute sees
// /tools and /vulndb read-only; acquire, mutate and tool do not see them at
// all (tool's /tools is its own fresh directory).
func TestExecute_ToolsAndVulnDBReadOnly(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	tools := sourceDir(t, map[string]string{"govulncheck": "tool"})
	db := sourceDir(t, map[string]string{"index/db.json": "{}"})
	r := openRunner(t, eng, testImage(t, eng, false), func(o *Options) { o.Config.ScanTools, o.Config.ScanVulnDB = tools, db })
	bc, _ := r.NewBuildCache()
	td, _ := r.NewToolDirs()
	mustProbe(t, r)
	try := `cat /tools/govulncheck /vulndb/index/db.json; echo; for p in /tools/x /tools/govulncheck /vulndb/x /vulndb/index/db.json; do if (echo >> $p) 2>/dev/null; then echo "$p writable"; else echo "$p read-only"; fi; done`
	res := mustRun(t, r, Job{Profile: Execute, BuildCache: bc, Cmd: sh(try)})
	want := "tool{}\n/tools/x read-only\n/tools/govulncheck read-only\n/vulndb/x read-only\n/vulndb/index/db.json read-only\n"
	if got := string(res.Stdout); got != want {
		t.Errorf("execute:\n%s\nwant\n%s", got, want)
	}
	snap, err := r.Snapshot(context.Background(), sourceDir(t, map[string]string{"go.mod": "module m\n"}), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	staging, err := r.NewStaging(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []Job{{Profile: Acquire}, {Profile: Mutate, Source: snap.Dir, Staging: staging}, {Profile: Tool, ModCache: td.ModCache, BuildCache: td.BuildCache, Tools: td.Bin}} {
		j.Cmd, j.anyCmd = sh("ls /vulndb 2>&1; ls /tools"), true
		res = mustRun(t, r, j)
		if strings.Contains(string(res.Stdout), "db.json") || strings.Contains(string(res.Stdout), "govulncheck") {
			t.Errorf("%s sees the scan directories:\n%s", j.Profile, res.Stdout)
		}
	}
	// The user's directories were copied, never mounted or written.
	if b, _ := os.ReadFile(filepath.Join(tools, "govulncheck")); string(b) != "tool" {
		t.Errorf("tools dir changed: %q", b)
	}
}

// TestExecute_ExtraReadOnlyMount: a probed directory outside the run (a
// build-cache seed) is mounted read-only in execute; one that did not pass
// the probe is refused.
func TestExecute_ExtraReadOnlyMount(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	r := openRunner(t, eng, testImage(t, eng, false), nil)
	seed := sourceDir(t, map[string]string{"cache/f": "seeded"})
	os.Chmod(seed, 0o755)
	unprobed := sourceDir(t, nil)
	ctx := context.Background()
	if err := r.Probe(ctx, seed); err != nil {
		t.Fatal(err)
	}
	ro := []container.Mount{{Type: container.Bind, Source: seed, Target: "/stockade/seed"}}
	res, err := r.Run(ctx, Job{Profile: Execute, BuildCache: mustCache(t, r), ReadOnly: ro, Env: map[string]string{"GOCACHEPROG": seedCacheProg},
		Cmd: sh(`cat /stockade/seed/cache/f; (echo x >> /stockade/seed/cache/f) 2>/dev/null && echo writable; rm -f /stockade/seed/cache/f 2>/dev/null; echo " $GOCACHEPROG"`)})
	if err != nil || string(res.Stdout) != "seeded "+seedCacheProg+"\n" {
		t.Errorf("extra mount: %q %v", res.Stdout, err)
	}
	if b, _ := os.ReadFile(filepath.Join(seed, "cache/f")); string(b) != "seeded" {
		t.Errorf("seed changed: %q", b)
	}
	ro[0].Source = unprobed
	if _, err := r.Run(ctx, Job{Profile: Execute, BuildCache: mustCache(t, r), ReadOnly: ro, Cmd: []string{"true"}}); !errors.Is(err, ErrNotOwned) {
		t.Errorf("unprobed extra mount = %v; want ErrNotOwned", err)
	}
}

func mustCache(t *testing.T, r *Runner) string {
	t.Helper()
	bc, err := r.NewBuildCache()
	if err != nil {
		t.Fatal(err)
	}
	return bc
}

// TestTool_IsolatedProfile: tool mounts no source and not the run's module
// cache, has fresh caches and a writable /tools, and always uses the public
// proxy and checksum database.
func TestTool_IsolatedProfile(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	fixture := sourceDir(t, map[string]string{"stockade.test/x/@v/list": "v1.0.0\n"})
	r := openRunner(t, eng, testImage(t, eng, false), func(o *Options) { o.Config.FixtureProxy = fixture })
	snap, _ := r.Snapshot(context.Background(), sourceDir(t, map[string]string{"go.mod": "module secret\n"}), SnapshotOptions{})
	td, _ := r.NewToolDirs()
	mustProbe(t, r)
	mustRun(t, r, Job{Profile: Acquire, Source: snap.Dir, Cmd: sh("echo repo > /modcache/repo-marker"), anyCmd: true})
	res := mustRun(t, r, Job{Profile: Tool, ModCache: td.ModCache, BuildCache: td.BuildCache, Tools: td.Bin, Cmd: sh(
		`ls -A /src /fixture-proxy /vulndb 2>&1 | grep -c 'No such file'; ls -A /modcache; ls -A /gocache; echo built > /tools/tool && echo tools-writable; echo $GOPROXY $GOSUMDB $GOBIN; cat /proc/net/dev | grep -c eth0`)})
	want := "3\ntools-writable\nhttps://proxy.golang.org sum.golang.org /tools\n1\n"
	if got := string(res.Stdout); got != want {
		t.Errorf("tool:\n%s\nwant\n%s(stderr %s)", got, want, res.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(td.Bin, "tool")); string(b) != "built\n" {
		t.Errorf("tool output not in its bin directory: %q", b)
	}
	if _, err := os.Stat(filepath.Join(r.ModCache(), "repo-marker")); err != nil {
		t.Errorf("acquire's write is missing: %v", err)
	}
	// With a fixture proxy, acquire has no network at all.
	res = mustRun(t, r, Job{Profile: Acquire, Source: snap.Dir, Cmd: sh("cat /proc/net/dev | grep -c eth0; cat /fixture-proxy/stockade.test/x/@v/list"), anyCmd: true})
	if got := string(res.Stdout); got != "0\nv1.0.0\n" {
		t.Errorf("fixture acquire: %q; want no eth0 and the proxy mounted", got)
	}
}

// TestExecute_BuildCacheFreshPerValidation: what one validation writes into
// its build cache is not there for the next; a build cache serves one
// validation only.
func TestExecute_BuildCacheFreshPerValidation(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	executeFreshCache(t, openRunner(t, eng, testImage(t, eng, false), nil))
}

// executeFreshCache is TestExecute_BuildCacheFreshPerValidation on runner
// r.
func executeFreshCache(t *testing.T, r *Runner) {
	mustProbe(t, r)
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range 2 {
		c, err := r.Start(ctx, Job{Profile: Execute, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.BuildCache()] {
			t.Fatalf("validation %d reuses build cache %s", i, c.BuildCache())
		}
		seen[c.BuildCache()] = true
		res, err := c.Exec(ctx, sh(`ls -A /gocache; echo poison > /gocache/marker; echo $GOCACHE`), ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(res.Stdout); got != "/gocache\n" {
			t.Errorf("validation %d: cache not fresh: %q", i, got)
		}
		if _, err := r.Start(ctx, Job{Profile: Execute, BuildCache: c.BuildCache()}); !errors.Is(err, ErrWeakened) {
			t.Errorf("second Start on one cache = %v; want ErrWeakened", err)
		}
		c.Close(ctx)
	}
}

// TestStart_StepsShareOneContainer: a long-lived container runs steps as
// execs, each with its exit code and capped output; a step past its timeout
// is killed with the container; Close removes it.
func TestStart_StepsShareOneContainer(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	r := openRunner(t, eng, testImage(t, eng, false), func(o *Options) { o.Config.OutputCap = 100 })
	snap, _ := r.Snapshot(context.Background(), sourceDir(t, map[string]string{"go.mod": "module m\n"}), SnapshotOptions{})
	mustProbe(t, r)
	ctx := context.Background()
	c, err := r.Start(ctx, Job{Profile: Execute, Source: snap.Dir, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, sh("pwd; echo step1 > /gocache/s1; echo oops >&2; exit 3"), ExecOptions{})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "/src\n" || string(res.Stderr) != "oops\n" {
		t.Errorf("step 1 = %d %q %q, %v", res.ExitCode, res.Stdout, res.Stderr, err)
	}
	res, err = c.Exec(ctx, sh("cat /gocache/s1; yes | head -c 5000; (echo >> /snapshot/go.mod) 2>/dev/null || echo >&2 ro"), ExecOptions{Env: map[string]string{"CGO_ENABLED": "0"}})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "step1\n") || !res.StdoutTruncated || res.StdoutBytes != 5006 || string(res.Stderr) != "ro\n" {
		t.Errorf("step 2 = %d %q (%d bytes, truncated %v) %q, %v", res.ExitCode, res.Stdout, res.StdoutBytes, res.StdoutTruncated, res.Stderr, err)
	}
	if _, err := c.Exec(ctx, []string{"env"}, ExecOptions{Env: map[string]string{"GOPROXY": "direct"}}); !errors.Is(err, ErrWeakened) {
		t.Errorf("step with GOPROXY = %v; want ErrWeakened", err)
	}
	start := time.Now()
	res, err = c.Exec(ctx, sh("sleep 30 & sleep 60"), ExecOptions{Timeout: 2 * time.Second})
	if err != nil || !res.TimedOut {
		t.Errorf("slow step = %+v, %v; want TimedOut", res, err)
	}
	if d := time.Since(start); d > 2*time.Second+HostGrace {
		t.Errorf("slow step took %v", d)
	}
	if _, err := c.Exec(ctx, []string{"true"}, ExecOptions{}); !errors.Is(err, ErrContainerEnded) {
		t.Errorf("step after a timeout = %v; want ErrContainerEnded", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Error(err)
	}
	if _, err := eng.ContainerInspect(ctx, c.ID()); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("container not removed: %v", err)
	}
}

// TestStart_WorkTree: a validation's container works in a throwaway copy
// of the snapshot that its tests may write as a developer's checkout
// (files beside the tests, symlinks, go.mod itself, chmod of their own
// files: the copy is the container user's); the snapshot stays read-only
// and untouched; Close removes the copy; the next validation gets a
// pristine one. A one-shot execute still sees the snapshot read-only, and
// a working tree cannot be named by hand.
func TestStart_WorkTree(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	r := openRunner(t, eng, testImage(t, eng, false), nil)
	ctx := context.Background()
	src := sourceDir(t, map[string]string{"go.mod": "module m\n", "pkg/a_test.go": "package pkg\n"})
	if err := os.Symlink("pkg/a_test.go", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(ctx, src, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustProbe(t, r)
	c, err := r.Start(ctx, Job{Profile: Execute, Source: snap.Dir, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wt := c.WorkTree()
	if wt == "" || c.WorkTreeTime() <= 0 {
		t.Fatalf("working tree %q filled in %v", wt, c.WorkTreeTime())
	}
	try := `cd pkg && echo log > out.log && ln -s a_test.go beside && mkdir -p d/e && chmod 600 a_test.go && echo '// x' >> ../go.mod && echo wrote
readlink ../link; stat -c '%u %a' a_test.go out.log
(echo x > /snapshot/y) 2>/dev/null || echo snapshot read-only`
	res, err := c.Exec(ctx, sh(try), ExecOptions{})
	want := "wrote\npkg/a_test.go\n65534 600\n65534 644\nsnapshot read-only\n"
	if err != nil || string(res.Stdout) != want {
		t.Errorf("in the working tree: %q (stderr %q), %v; want %q", res.Stdout, res.Stderr, err, want)
	}
	if _, err := os.Stat(filepath.Join(wt, "pkg", "out.log")); err != nil {
		t.Errorf("the working tree on the host: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(snap.Dir, "go.mod")); string(b) != "module m\n" {
		t.Errorf("snapshot changed: %q", b)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(wt); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("working tree left after Close: %v", err)
	}
	c2, err := r.Start(ctx, Job{Profile: Execute, Source: snap.Dir, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	res, err = c2.Exec(ctx, sh("ls pkg; cat go.mod"), ExecOptions{})
	if err != nil || string(res.Stdout) != "a_test.go\nmodule m\n" {
		t.Errorf("second validation's tree: %q, %v", res.Stdout, err)
	}
	bc, _ := r.NewBuildCache()
	res = mustRun(t, r, Job{Profile: Execute, Source: snap.Dir, BuildCache: bc, Cmd: sh("(echo x > /src/y) 2>/dev/null || echo ro")})
	if string(res.Stdout) != "ro\n" {
		t.Errorf("one-shot execute wrote the source: %q", res.Stdout)
	}
	if _, err := r.Run(ctx, Job{Profile: Execute, Source: snap.Dir, WorkTree: c2.WorkTree(), Cmd: []string{"true"}}); !errors.Is(err, ErrInvalidJob) {
		t.Errorf("Run with a working tree = %v; want ErrInvalidJob", err)
	}
	if _, err := r.Start(ctx, Job{Profile: Execute, Source: snap.Dir, WorkTree: c2.WorkTree()}); !errors.Is(err, ErrInvalidJob) {
		t.Errorf("Start with a working tree = %v; want ErrInvalidJob", err)
	}
}

// TestStart_StepCutToLifetime: a step cannot outlive its container; it is
// timed out by its own in-container timeout, reported TimedOut.
func TestStart_StepCutToLifetime(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	r := openRunner(t, eng, testImage(t, eng, false), nil)
	mustProbe(t, r)
	ctx := context.Background()
	c, err := r.Start(ctx, Job{Profile: Execute, Timeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	res, err := c.Exec(ctx, []string{"sleep", "30"}, ExecOptions{Timeout: 30 * time.Second})
	if err != nil || !res.TimedOut || res.Phases.Wait > 10*time.Second {
		t.Errorf("step past the lifetime = TimedOut %v after %v, %v", res.TimedOut, res.Phases.Wait, err)
	}
	if _, err := c.Exec(ctx, []string{"true"}, ExecOptions{}); !errors.Is(err, ErrContainerEnded) {
		t.Errorf("step after the lifetime = %v; want ErrContainerEnded", err)
	}
}

// TestClose_RemovesEverything: files the container user wrote (in
// read-only directories, as the module cache has) are removed through a
// container, and Close leaves only the lock file in the data directory.
func TestClose_RemovesEverything(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	img := testImage(t, eng, false)
	ctx := context.Background()
	dataDir := testDataDir(t)
	r, err := Open(ctx, eng, Options{DataDir: dataDir, Owner: enginetest.Owner(t), Config: Config{Image: img}, Budgets: quickBudgets})
	if err != nil {
		t.Fatal(err)
	}
	bc, _ := r.NewBuildCache()
	mustProbe(t, r)
	mustRun(t, r, Job{Profile: Execute, BuildCache: bc, Cmd: sh("mkdir -p /gocache/a/b && echo x > /gocache/a/b/f && chmod -R a-w /gocache/a")})
	mustRun(t, r, Job{Profile: Acquire, Cmd: sh("mkdir -p /modcache/m@v1 && echo x > /modcache/m@v1/f && chmod -R a-w /modcache/m@v1"), anyCmd: true})
	// The host user here may be root, who could remove anything; remove
	// through the container explicitly to prove that path.
	if err := r.removeInContainer(ctx, writableDirs(r.runDir)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{bc, r.ModCache()} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("%s not emptied by the cleanup container: %v", d, ents)
		}
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(r.DataDir())
	if len(ents) != 2 || ents[0].Name() != MarkerFile || ents[1].Name() != LockFile {
		t.Errorf("data dir after Close: %v; want only the marker and the lock file", ents)
	}
}

// Environment of the child process of TestProbe_DetectsUnsharedDirectory.
const (
	probeChildEnv = "STOCKADE_TEST_PROBE_HIDDEN" // the directory hidden from the engine
	probeDataEnv  = "STOCKADE_TEST_PROBE_DATA"   // the data directory
	probeImageEnv = "STOCKADE_TEST_PROBE_IMAGE"
	probeOKLine   = "probe-child: detected"
)

// TestProbe_DetectsUnsharedDirectory: a directory the engine cannot see is
// named by the probe's error. On native Linux every path is shared, so the
// test makes one: it re-runs itself in a private mount namespace (unshare
// -m) in which a tmpfs covers the directory; the marker lands in the tmpfs,
// while the engine, in the host's namespace, sees the empty directory
// beneath.
func TestProbe_DetectsUnsharedDirectory(t *testing.T) {
	if hidden := os.Getenv(probeChildEnv); hidden != "" {
		probeChild(t, hidden)
		return
	}
	eng := enginetest.Client(t)
	img := testImage(t, eng, false)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		skipOrFail(t, "no unshare(1): %v", err)
	}
	args := []string{"--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		args = append([]string{"--map-root-user"}, args...)
	}
	hidden := filepath.Join(testDataDir(t)+"-hidden", "x")
	if err := os.MkdirAll(hidden, 0o755); err != nil {
		t.Fatal(err)
	}
	data := testDataDir(t)
	// sh mounts the tmpfs inside the new namespace, then becomes this test.
	script := `mount -t tmpfs stockade-probe-test "$1" && shift && exec "$@"`
	cmdArgs := append(args, "sh", "-c", script, "sh", hidden, os.Args[0], "-test.run=^TestProbe_DetectsUnsharedDirectory$", "-test.v", "-test.count=1")
	cmd := exec.Command(unshare, cmdArgs...)
	cmd.Env = append(os.Environ(), probeChildEnv+"="+hidden, probeDataEnv+"="+data, probeImageEnv+"="+img)
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(string(out), "Operation not permitted") {
		skipOrFail(t, "cannot make a private mount namespace here: %s", out)
	}
	if err != nil || !strings.Contains(string(out), probeOKLine) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	// Outside the namespace nothing was left behind.
	if ents, _ := os.ReadDir(hidden); len(ents) != 0 {
		t.Errorf("hidden directory has %v on the host", ents)
	}
}

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if enginetest.Required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// probeChild runs inside the private mount namespace.
func probeChild(t *testing.T, hidden string) {
	eng := enginetest.Client(t)
	ctx := context.Background()
	r, err := Open(ctx, eng, Options{DataDir: os.Getenv(probeDataEnv), Owner: enginetest.Owner(t), Config: Config{Image: os.Getenv(probeImageEnv)}, Budgets: quickBudgets})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	// The marker is visible here, in the tmpfs.
	err = r.Probe(ctx, hidden)
	var pe *ProbeError
	if !errors.Is(err, ErrMountInvisible) || !errors.As(err, &pe) || !slices.Equal(pe.Dirs, []string{hidden}) {
		t.Fatalf("Probe = %v; want a *ProbeError naming only %s", err, hidden)
	}
	if !strings.Contains(err.Error(), hidden) {
		t.Errorf("message %q does not name the directory", err)
	}
	if _, err := r.Run(ctx, Job{Profile: Acquire, Cmd: []string{"true"}}); !errors.Is(err, ErrNotProbed) {
		t.Errorf("Run after a failed probe = %v; want ErrNotProbed", err)
	}
	// Without the hidden directory, the probe passes, and leaves no marker.
	if err := r.Probe(ctx); err != nil {
		t.Fatalf("Probe of the run's own directories = %v", err)
	}
	if ents, _ := os.ReadDir(r.ModCache()); len(ents) != 0 {
		t.Errorf("markers left behind: %v", ents)
	}
	fmt.Println(probeOKLine)
}

// TestProbe_ImageWithoutListing: a probe whose listing cannot run (an
// image without ls, as a toolchain image built without busybox was) is an
// error of its own, never a claim that the engine does not see the mounts.
func TestProbe_ImageWithoutListing(t *testing.T) {
	eng := enginetest.Client(t)
	prog := filepath.Join(t.TempDir(), "prog")
	bin, err := programs.Agent.For("amd64")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A tag of its own: the default (image.BaseTag) is the base image
	// other tests run.
	tag := "stockade-test/no-listing:" + container.RandomHex(6)
	res, err := image.Build(ctx, eng, image.Options{NoGo: true, NoBusybox: true, NoCABundle: true, Program: prog, Tag: tag})
	if err != nil {
		t.Fatalf("build an image without ls: %v", err)
	}
	t.Cleanup(func() { eng.ImageRemove(context.Background(), tag, false) })
	r := openRunner(t, eng, res.ID, nil)
	err = r.Probe(ctx)
	if err == nil || errors.Is(err, ErrMountInvisible) || !strings.Contains(err.Error(), "did not run") {
		t.Fatalf("Probe in an image without ls = %v; want an error saying the listing did not run", err)
	}
	if _, err := r.Run(ctx, Job{Profile: Acquire, Cmd: []string{"true"}}); !errors.Is(err, ErrNotProbed) {
		t.Errorf("Run after a probe that did not run = %v; want ErrNotProbed", err)
	}
}

// TestGo_AcquireThenExecute runs the real toolchain through the profiles:
// acquire downloads a dependency from a fixture proxy with no network,
// mutate upgrades it in the staging copy of go.mod and go.sum, and execute
// lists, builds and vets the module with the
// source and module cache read-only, in one long-lived container; a
// long-lived acquire container lists versions as an exec.
func TestGo_AcquireThenExecute(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	img := testImage(t, eng, true)
	proxy := filepath.Join(t.TempDir(), "proxy")
	if err := modproxy.Generate("../../testdata/modules", proxy); err != nil {
		t.Fatal(err)
	}
	sum, err := modproxy.GoSumLines(proxy, module.Version{Path: "stockade.test/greet", Version: "v1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	src := sourceDir(t, map[string]string{
		"go.mod": "module m\n\ngo 1.22\n\nrequire stockade.test/greet v1.0.0\n",
		"go.sum": sum,
		"m.go":   "package m\n\nimport \"stockade.test/greet\"\n\nfunc Hi() string { return greet.Hello(\"m\") }\n",
	})
	r := openRunner(t, eng, img, func(o *Options) { o.Config.FixtureProxy = proxy; o.Config.Timeout = time.Minute })
	snap, err := r.Snapshot(context.Background(), src, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustProbe(t, r)
	ctx := context.Background()
	res := mustRun(t, r, Job{Profile: Acquire, Source: snap.Dir, Cmd: []string{"go", "mod", "download", "-x"}})
	if res.ExitCode != 0 {
		t.Fatalf("acquire: exit %d\n%s", res.ExitCode, res.Stderr)
	}
	// Mutate upgrades in the staging copy only.
	st, err := r.NewStaging(snap)
	if err != nil {
		t.Fatal(err)
	}
	res = mustRun(t, r, Job{Profile: Mutate, Source: snap.Dir, Staging: st, Cmd: []string{"go", "get", "-modfile=" + StagingDir + "/go.mod", "stockade.test/greet@v1.1.0"}})
	if res.ExitCode != 0 {
		t.Fatalf("mutate: exit %d\n%s", res.ExitCode, res.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(st, "go.mod")); !strings.Contains(string(b), "stockade.test/greet v1.1.0") {
		t.Errorf("staging go.mod not upgraded:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(st, "go.sum")); !strings.Contains(string(b), "stockade.test/greet v1.1.0 h1:") {
		t.Errorf("staging go.sum not updated:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(snap.Dir, "go.mod")); strings.Contains(string(b), "v1.1.0") {
		t.Error("mutate wrote the snapshot")
	}
	// A long-lived acquire container has the profile's mounts and
	// network, and runs module commands only, as execs.
	ac, err := r.Start(ctx, Job{Profile: Acquire, Source: snap.Dir, Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close(ctx)
	res, err = ac.Exec(ctx, []string{"go", "list", "-m", "-versions", "stockade.test/greet"}, ExecOptions{})
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "v1.1.0") {
		t.Errorf("go list -m -versions in the acquire container: exit %d, %v\n%s%s", res.ExitCode, err, res.Stdout, res.Stderr)
	}
	if _, err := ac.Exec(ctx, []string{"cat", "/proc/net/dev"}, ExecOptions{}); !errors.Is(err, ErrInvalidJob) {
		t.Errorf("a non-module command in the acquire container = %v; want ErrInvalidJob", err)
	}
	ci, err := eng.ContainerInspect(ctx, ac.ID())
	if err != nil {
		t.Fatal(err)
	}
	if ci.HostConfig.NetworkMode != "none" {
		t.Errorf("acquire container's network %q; want none (fixture proxy)", ci.HostConfig.NetworkMode)
	}
	rw := map[string]bool{}
	for _, m := range ci.Mounts {
		rw[m.Destination] = m.RW
	}
	if want := map[string]bool{SourceDir: false, ModCacheDir: true, BuildCacheDir: true, FixtureProxyDir: false, image.GoRootInImage: false}; !maps.Equal(rw, want) {
		t.Errorf("acquire container's mounts (destination: writable) %v; want %v", rw, want)
	}
	c, err := r.Start(ctx, Job{Profile: Execute, Source: snap.Dir, Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, argv := range [][]string{
		{"go", "list", "-deps", "./..."},
		{"go", "build", "./..."}, // a library: no -o (see the seed: -o only for main packages)
		{"go", "vet", "./..."},
	} {
		res, err := c.Exec(ctx, argv, ExecOptions{})
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%v: exit %d, %v\n%s%s", argv, res.ExitCode, err, res.Stdout, res.Stderr)
		}
	}
	// Nothing can be fetched or written in execute.
	res, err = c.Exec(ctx, sh("go mod download stockade.test/greet@v1.0.1 2>&1; echo exit=$?; touch /modcache/x 2>&1 | grep -c 'Read-only'"), ExecOptions{})
	if err != nil || !strings.Contains(string(res.Stdout), "exit=1") || !strings.HasSuffix(string(res.Stdout), "1\n") {
		t.Errorf("execute fetch/write: %q %v", res.Stdout, err)
	}
}

// fakeGoImage builds a toolchain image of its own for a test that
// publishes or sweeps GOROOT copies, so that it changes nothing another
// test's image uses: a GOROOT holding only what Build and GoRoot check
// (bin/go, here a static program that is not Go; VERSION) and a file
// unique to the call, so the image ID is the test's own, tagged tag. The
// image and its GOROOT volumes are removed when the test ends.
func fakeGoImage(t *testing.T, eng *dockerapi.Client, tag string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"bin", "pkg/tool/linux_amd64", "src/runtime"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := programs.Agent.For("amd64")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"bin/go":                 bin,
		"VERSION":                []byte("go1.26.8\n"),
		"src/runtime/unique.txt": []byte(container.RandomHex(16)),
	} {
		if err := os.WriteFile(filepath.Join(root, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cache, err := enginetest.ImageCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := image.Build(ctx, eng, image.Options{GoRoot: root, CacheDir: cache, Tag: tag})
	if err != nil {
		t.Fatalf("build a toolchain image of the test's own: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		vs, _ := eng.VolumeList(ctx, dockerapi.Filters{"label": {LabelGoRootImage + "=" + res.ID}})
		slices.SortFunc(vs, func(a, b dockerapi.Volume) int { return strings.Compare(b.Labels[label.Role], a.Labels[label.Role]) })
		for _, v := range vs {
			eng.VolumeRemove(ctx, v.Name, true)
		}
		eng.ImageRemove(ctx, res.ID, true)
	})
	return res.ID
}

// goRootVolumes returns the names of image img's GOROOT copies and
// markers.
func goRootVolumes(t *testing.T, eng *dockerapi.Client, img string) (copies, markers []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vs, err := eng.VolumeList(ctx, dockerapi.Filters{"label": {LabelGoRootImage + "=" + img}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		switch v.Labels[label.Role] {
		case RoleGoRoot:
			copies = append(copies, v.Name)
		case RoleGoRootMarker:
			markers = append(markers, v.Name)
		}
	}
	return copies, markers
}

// TestGoRoot_OneCopyPerImage: three processes racing to copy an image's
// GOROOT publish one copy, the losers remove theirs, and later calls find
// it; an image without Go has none. The race runs on an image of the
// test's own (fakeGoImage), so no other test's published copy is touched.
// A runner mounts the copy of its image read-only, and the go command
// works from it.
func TestGoRoot_OneCopyPerImage(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	img := fakeGoImage(t, eng, "stockade-test/goroot:"+container.RandomHex(6))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sc := container.Scope{Owner: enginetest.Owner(t), Run: "goroot-test", DataDir: "goroot-test"}
	names := make([]string, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names[i], errs[i] = GoRoot(ctx, eng, img, sc, quickBudgets)
		}()
	}
	wg.Wait()
	for i := range names {
		if errs[i] != nil || names[i] == "" || names[i] != names[0] {
			t.Fatalf("GoRoot: %q, %v; want one name for all (%q)", names[i], errs[i], names)
		}
	}
	if copies, markers := goRootVolumes(t, eng, img); !slices.Equal(copies, names[:1]) || len(markers) != 1 {
		t.Errorf("copies %q, markers %q of the image's GOROOT; want only the published %s and its marker", copies, markers, names[0])
	}
	if again, err := GoRoot(ctx, eng, img, sc, quickBudgets); err != nil || again != names[0] {
		t.Errorf("GoRoot again = %q, %v; want %q", again, err, names[0])
	}
	if none, err := GoRoot(ctx, eng, testImage(t, eng, false), sc, quickBudgets); err != nil || none != "" {
		t.Errorf("GoRoot of an image without Go = %q, %v; want none", none, err)
	}

	real := testImage(t, eng, true)
	published, err := GoRoot(ctx, eng, real, sc, quickBudgets)
	if err != nil || published == "" {
		t.Fatalf("GoRoot of the toolchain image = %q, %v", published, err)
	}
	r := openRunner(t, eng, real, nil)
	if r.Config().GoRoot != published {
		t.Errorf("runner's GoRoot %q; want %q", r.Config().GoRoot, published)
	}
	mustProbe(t, r)
	res := mustRun(t, r, Job{Profile: Execute, BuildCache: mustCache(t, r), Cmd: []string{"sh", "-c", "go version && grep -w " + image.GoRootInImage + " /proc/mounts && touch " + image.GoRootInImage + "/x"}})
	if !strings.Contains(string(res.Stdout), "go version go") || !strings.Contains(string(res.Stdout), " ro,") || !strings.Contains(string(res.Stderr), "Read-only file system") {
		t.Errorf("go in a container over the GOROOT volume (mounted read-only, unwritable): exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestSweepGoRoots: the GOROOT copies of an image superseded by a newer
// build of its tag go, with the image; those of a current image, and of a
// superseded image a container still uses, stay; those of an image that
// is gone go.
func TestSweepGoRoots(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sc := container.Scope{Owner: enginetest.Owner(t), Run: "goroot-sweep", DataDir: "goroot-sweep"}
	tag := "stockade-test/goroot-sweep:" + container.RandomHex(6)
	publish := func(img string) {
		t.Helper()
		if v, err := GoRoot(ctx, eng, img, sc, quickBudgets); err != nil || v == "" {
			t.Fatalf("GoRoot(%s) = %q, %v", img, v, err)
		}
	}
	old := fakeGoImage(t, eng, tag)
	publish(old)
	inUse := fakeGoImage(t, eng, tag) // supersedes old
	publish(inUse)
	// A container made from inUse (never started) keeps it, and its copy,
	// once it is superseded too.
	c, err := eng.ContainerCreate(ctx, container.RandomName("goroot-sweep"), dockerapi.ContainerConfig{
		Image: inUse, Cmd: []string{"true"}, Labels: label.Base(sc.Owner, label.KindToolchain),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.ContainerRemove(context.Background(), c, dockerapi.RemoveOptions{Force: true}) })
	current := fakeGoImage(t, eng, tag) // supersedes inUse, keeps the tag
	publish(current)
	gone := fakeGoImage(t, eng, "stockade-test/goroot-gone:"+container.RandomHex(6))
	publish(gone)
	if err := eng.ImageRemove(ctx, gone, true); err != nil {
		t.Fatal(err)
	}

	if _, err := SweepGoRoots(ctx, eng, quickBudgets); err != nil {
		t.Fatalf("SweepGoRoots: %v", err)
	}
	for _, tc := range []struct {
		what, img string
		keep      bool
	}{{"superseded", old, false}, {"superseded but in use", inUse, true}, {"current", current, true}, {"gone", gone, false}} {
		copies, markers := goRootVolumes(t, eng, tc.img)
		if kept := len(copies) == 1 && len(markers) == 1; kept != tc.keep || !tc.keep && len(copies)+len(markers) != 0 {
			t.Errorf("%s image: copies %q, markers %q after the sweep; want kept %v", tc.what, copies, markers, tc.keep)
		}
	}
	if _, err := eng.ImageInspect(ctx, old); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("the superseded image is still there (%v); want it removed with its copy", err)
	}
	if _, err := eng.ImageInspect(ctx, inUse); err != nil {
		t.Errorf("the superseded image a container uses was removed: %v", err)
	}
}

// TestTool_BehindTheGate: the tool profile reaches the public module proxy
// only through its run's egress gate (the real proxy.golang.org, over
// CONNECT), which refuses any other host (403, recorded) while a direct
// connection has no route at all; TakeEgress returns each phase's records
// once; Reap removes the gate and its network (a crashed run's), and the
// run's gate is then down, not bypassed.
func TestTool_BehindTheGate(t *testing.T) {
	t.Parallel()
	eng := enginetest.Client(t)
	owner := enginetest.Owner(t)
	r := openRunner(t, eng, testImage(t, eng, true), func(o *Options) { o.Owner = owner })
	td, _ := r.NewToolDirs()
	mustProbe(t, r)
	tool := func(script string) string {
		t.Helper()
		res := mustRun(t, r, Job{Profile: Tool, ModCache: td.ModCache, BuildCache: td.BuildCache, Tools: td.Bin, Cmd: sh(script), Timeout: 3 * time.Minute})
		return string(res.Stdout) + string(res.Stderr)
	}
	if out := tool(`go mod download -json golang.org/x/mod@v0.17.0 >/dev/null && echo downloaded`); !strings.Contains(out, "downloaded") {
		t.Fatalf("go mod download through the gate failed:\n%s", out)
	}
	recs, lost, err := r.TakeEgress(context.Background())
	if err != nil || lost != 0 {
		t.Fatalf("TakeEgress = %v, lost %d", err, lost)
	}
	if len(recs) == 0 {
		t.Fatal("no record of the download")
	}
	for _, rec := range recs {
		if rec.Method != "CONNECT" || rec.Host != "proxy.golang.org" || rec.Port != "443" || rec.Verdict != domain.EgressAllowed || rec.BytesDn == 0 {
			t.Errorf("download record %+v; want CONNECT proxy.golang.org:443 admitted, with bytes down", rec)
		}
	}
	// The go command asks another host through the gate, then straight
	// past it with the proxy variables unset.
	out := tool(`export GONOSUMDB='*'; GOPROXY=https://example.com/ go mod download golang.org/x/mod@v0.16.0; echo rc=$?
		HTTPS_PROXY= https_proxy= GOPROXY=https://1.1.1.1/ timeout 20 go mod download golang.org/x/mod@v0.16.0; echo rc=$?`)
	if strings.Contains(out, "rc=0") || !strings.Contains(out, "Forbidden") || strings.Count(out, "rc=") != 2 {
		t.Errorf("a host not admitted, or a direct connection, got through:\n%s", out)
	}
	recs, _, err = r.TakeEgress(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Host != "example.com" || recs[0].Verdict != domain.EgressRefused || recs[0].Status != 403 {
		t.Errorf("second phase's record %+v; want only example.com, refused (the direct attempt never reaches the gate)", recs)
	}
	// A crashed run's gate and network are its data directory's to reap.
	crash(r)
	if _, err := Reap(context.Background(), eng, r.DataDir()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if left, err := enginetest.Leftovers(ctx, eng, map[string]string{label.Owner: owner}); err != nil || len(left) != 0 {
		t.Errorf("after Reap: %q, %v; want nothing left", left, err)
	}
	if _, _, err := r.TakeEgress(ctx); !errors.Is(err, egress.ErrGateDown) {
		t.Errorf("TakeEgress of a reaped gate = %v; want ErrGateDown", err)
	}
}
