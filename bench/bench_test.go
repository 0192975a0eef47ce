// Package bench is Stockade's benchmark suite. It is slow (minutes) and
// needs an engine, so it runs only when asked:
//
//	STOCKADE_BENCH=1 go test ./bench -run TestSuite -v -timeout 3h
//
// It prints one table of medians and ratios, every row measured side by side
// in the same run, rounds interleaved so load on the machine falls on all
// columns alike. docs/PERFORMANCE.md holds the current figures; the runs
// they come from, with the machine and its load, are in bench/results/.
//
// Environment: STOCKADE_BENCH_ROUNDS (default 3) rounds of the fast
// measurements; STOCKADE_BENCH_EMPTY_ROUNDS (default 2) rounds of the
// empty-cache validations, which take minutes each; STOCKADE_BENCH_DATADIR
// (default <user cache>/stockade-bench) keeps the seed between runs;
// STOCKADE_BENCH_OUT writes the table to a file as well;
// STOCKADE_BENCH_ONLY=validations,inspect,maintain,overhead,sessions,scan runs only the
// sections named.
package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/hosttest"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/inspect"
	"github.com/stockade/stockade/internal/modproxy"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/workflow"
	"github.com/stockade/stockade/sandbox"
	sdocker "github.com/stockade/stockade/sandbox/docker"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// EnableEnv is the variable that turns the suite on.
const EnableEnv = "STOCKADE_BENCH"

// fixtures are the modules validated, from testdata/repos.
var fixtures = []string{"clean", "failing-test", "vet-finding"}

// Cache modes of a validation.
const (
	modeEmpty  = "empty fresh"
	modeSeeded = "seeded fresh"
	modeWarm   = "warm shared"
	// modeLinked is the rejected design, measured on the host only: a fresh
	// cache that is a farm of hard links to the seed's files.
	modeLinked = "hard-linked fresh"
)

// settings are the cache-key settings of the execute profile.
var settings = cacheseed.Settings{GOFLAGS: "-mod=mod", CGOEnabled: "0"}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// suite holds what every measurement shares.
type suite struct {
	t         *testing.T
	eng       *dockerapi.Client
	img       image.Result
	dataDir   string
	tcfg      toolchain.Config
	seed      cacheseed.Seed
	seedTime  time.Duration // Ensure's wall time in this run
	modCache  string
	mods      map[string]string // fixture name → host copy
	hostProg  string            // the GOCACHEPROG program built for the host
	warm      string            // the warm shared cache (container)
	hostWarm  string            // the warm shared cache (host)
	linkTimes []time.Duration   // making each hard-link farm
	// farmSrc is a copy of the seed's cache that the hard-link farms link
	// to: the go command running as root on the host would update the
	// shared inodes' times (and could write them), and the real seed must
	// stay as it was built.
	farmSrc string
}

func TestSuite(t *testing.T) {
	if os.Getenv(EnableEnv) != "1" {
		t.Skipf("benchmarks run only with %s=1 (see package doc)", EnableEnv)
	}
	s := setup(t)
	rounds, emptyRounds := envInt("STOCKADE_BENCH_ROUNDS", 3), envInt("STOCKADE_BENCH_EMPTY_ROUNDS", 2)

	var tb table
	tb.title("Machine: %s", machine(t, s.eng))
	tb.title("Image %s (%s); seed %s: %d std packages, %d files, %.0f MiB", short(s.img.ID), s.img.GoVersion, s.seed.Key, s.seed.Meta.Packages, s.seed.Meta.Files, float64(s.seed.Meta.Bytes)/(1<<20))
	if s.seed.Built {
		tb.title("Seed built in this run: %v (Ensure wall time %v)", s.seed.Meta.BuildTime.Round(time.Second), s.seedTime.Round(time.Second))
	} else {
		tb.title("Seed reused (Ensure wall time %v); its recorded build time: %v", s.seedTime.Round(time.Millisecond), s.seed.Meta.BuildTime.Round(time.Second))
	}

	only := os.Getenv("STOCKADE_BENCH_ONLY")
	want := func(section string) bool {
		return only == "" || strings.Contains(","+only+",", ","+section+",")
	}
	if want("validations") {
		s.validations(&tb, rounds, emptyRounds)
	}
	if want("inspect") {
		s.inspect(&tb, rounds)
	}
	if want("maintain") {
		s.maintain(&tb, rounds)
	}
	if want("overhead") {
		s.overhead(&tb, rounds)
	}
	if want("sessions") {
		s.sessions(&tb, rounds)
	}
	if want("scan") {
		s.scan(&tb, rounds)
	}

	out := tb.String()
	fmt.Println(out)
	if f := os.Getenv("STOCKADE_BENCH_OUT"); f != "" {
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func setup(t *testing.T) *suite {
	eng := enginetest.Client(t)
	ctx := context.Background()
	img, err := image.Build(ctx, eng, image.Options{})
	if err != nil {
		t.Fatalf("image.Build: %v", err)
	}
	dataDir := os.Getenv("STOCKADE_BENCH_DATADIR")
	if dataDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		dataDir = filepath.Join(base, "stockade-bench")
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &suite{t: t, eng: eng, img: img, dataDir: dataDir, mods: map[string]string{}}
	owner := enginetest.Owner(t)

	start := time.Now()
	s.seed, err = cacheseed.Ensure(ctx, eng, cacheseed.Config{DataDir: dataDir, Image: img.ID, GoVersion: img.GoVersion, Settings: settings, Owner: owner})
	if err != nil {
		t.Fatalf("cacheseed.Ensure: %v", err)
	}
	s.seedTime = time.Since(start)

	// A run's scratch: fixture proxy, module cache, copies of the fixtures.
	run := s.tempDir("run-")
	proxy := filepath.Join(run, "proxy")
	if err := modproxy.Generate(repoPath(t, "testdata/modules"), proxy); err != nil {
		t.Fatal(err)
	}
	ncpu := 0
	if info, err := eng.Info(ctx); err == nil {
		ncpu = info.NCPU
	}
	s.tcfg = toolchain.Config{
		Image: img.ID, FixtureProxy: proxy,
		Limits: container.ToolchainLimits().Clamp(ncpu),
		Owner:  owner, RunID: "bench-" + container.RandomHex(4), DataDirID: toolchain.DataDirID(dataDir),
	}
	// The image's GOROOT from its volume, as a Runner gives every
	// toolchain container (toolchain.GoRoot).
	goroot, err := toolchain.GoRoot(ctx, eng, img.ID, container.Scope{Owner: owner, Run: s.tcfg.RunID, DataDir: s.tcfg.DataDirID}, container.Budgets{})
	if err != nil {
		t.Fatalf("GOROOT volume: %v", err)
	}
	s.tcfg.GoRoot = goroot
	s.modCache = s.dir777(filepath.Join(run, "modcache"))
	for _, f := range fixtures {
		dst := filepath.Join(run, "src", f)
		copyTree(t, repoPath(t, "testdata/repos/"+f), dst)
		s.mods[f] = dst
		res, err := s.runJob(ctx, toolchain.Job{Profile: toolchain.Acquire, Cmd: []string{"go", "mod", "download"}, Source: dst, ModCache: s.modCache, BuildCache: s.dir777(filepath.Join(run, "acquire-cache-"+f))})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("acquire %s: %v exit %d\n%s", f, err, res.ExitCode, res.Stderr)
		}
	}
	s.farmSrc = filepath.Join(run, "farm-src")
	copyTree(t, filepath.Join(s.seed.Dir, "cache"), s.farmSrc)
	s.warm = s.dir777(filepath.Join(run, "warm"))
	s.hostWarm = s.dir777(filepath.Join(run, "host-warm"))

	s.hostProg = filepath.Join(run, "cacheprog")
	cmd := exec.Command("go", "build", "-o", s.hostProg, "./internal/cacheseed/cacheprog")
	cmd.Dir = repoPath(t, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building cacheprog: %v\n%s", err, out)
	}
	t.Cleanup(func() { s.removeTree(run) })
	return s
}

// validations measures the three fixtures under each cache mode, in the
// container and on the host.
func (s *suite) validations(tb *table, rounds, emptyRounds int) {
	ctx := context.Background()
	// Warm the shared caches first: a warm cache is one an earlier run of
	// the same module filled.
	for _, f := range fixtures {
		s.container(ctx, f, s.warm, cacheseed.Seed{})
		s.host(ctx, f, s.hostWarm, cacheseed.Seed{})
	}
	type key struct{ fix, mode string }
	ctr := map[key][]run{}
	host := map[key][]run{}
	for r := 0; r < rounds; r++ {
		for _, f := range fixtures {
			if r < emptyRounds {
				ctr[key{f, modeEmpty}] = append(ctr[key{f, modeEmpty}], s.container(ctx, f, s.newCache(), cacheseed.Seed{}))
			}
			ctr[key{f, modeSeeded}] = append(ctr[key{f, modeSeeded}], s.container(ctx, f, s.newCache(), s.seed))
			ctr[key{f, modeWarm}] = append(ctr[key{f, modeWarm}], s.container(ctx, f, s.warm, cacheseed.Seed{}))
			host[key{f, modeSeeded}] = append(host[key{f, modeSeeded}], s.host(ctx, f, s.newCache(), s.seed))
			host[key{f, modeWarm}] = append(host[key{f, modeWarm}], s.host(ctx, f, s.hostWarm, cacheseed.Seed{}))
			host[key{f, modeLinked}] = append(host[key{f, modeLinked}], s.host(ctx, f, s.linkFarm(), cacheseed.Seed{}))
		}
	}

	tb.section("Validation (go list, build, vet, test -json) of a fixture module: median wall time, container create to remove",
		"fixture", "empty fresh", "seeded fresh", "warm shared", "seeded/warm", "empty/seeded", "host seeded", "host warm", "host hard-linked", "seeded/host seeded", "entries written empty/seeded/warm", "verdict same")
	for _, f := range fixtures {
		e, sd, w := ctr[key{f, modeEmpty}], ctr[key{f, modeSeeded}], ctr[key{f, modeWarm}]
		hs, hw, hl := host[key{f, modeSeeded}], host[key{f, modeWarm}], host[key{f, modeLinked}]
		me, ms, mw := medianOf(e, total), medianOf(sd, total), medianOf(w, total)
		mhs, mhw, mhl := medianOf(hs, total), medianOf(hw, total), medianOf(hl, total)
		same := "yes"
		for _, rs := range [][]run{e, sd, w, hs, hw, hl} {
			for _, r := range rs {
				if r.verdict != e[0].verdict {
					same = "NO"
					s.t.Errorf("%s: verdicts differ:\n%s\n%s", f, r.verdict, e[0].verdict)
				}
			}
		}
		tb.row(f, secs(me), secs(ms), secs(mw), ratio(ms, mw), ratio(me, ms), secs(mhs), secs(mhw), secs(mhl), ratio(ms, mhs),
			fmt.Sprintf("%d/%d/%d", e[0].written, sd[0].written, w[0].written), same)
	}
	tb.title("Making a hard-linked fresh cache (%d links): median %v, not included in the host hard-linked column.", s.seed.Meta.Files, median(s.linkTimes).Round(time.Millisecond))
	tb.section("Where a seeded validation's time goes (median): engine calls vs the toolchain's work",
		"fixture", "create+start", "list", "build", "vet", "test", "remove", "host list", "host build", "host vet", "host test")
	for _, f := range fixtures {
		sd, hs := ctr[key{f, modeSeeded}], host[key{f, modeSeeded}]
		tb.row(f, ms(medianOf(sd, func(r run) time.Duration { return r.setup })),
			ms(medianOf(sd, step("list"))), ms(medianOf(sd, step("build"))), ms(medianOf(sd, step("vet"))), ms(medianOf(sd, step("test"))),
			ms(medianOf(sd, func(r run) time.Duration { return r.teardown })),
			ms(medianOf(hs, step("list"))), ms(medianOf(hs, step("build"))), ms(medianOf(hs, step("vet"))), ms(medianOf(hs, step("test"))))
	}
}

// inspect measures a whole `stockade inspect` (inspect.Inspect: check,
// image, lock and reap, seed, snapshot, probe, acquire, validation,
// candidates) of each fixture against the host running the same commands
// (go mod download, the validation, the candidates listing) with the same
// cache state: modules already downloaded, a fresh build cache from the
// same seed. The first inspect of each fixture is untimed: it builds
// inspect's seed (its settings differ from this suite's, so it is its own
// key) and fills the module cache.
func (s *suite) inspect(tb *table, rounds int) {
	ctx := context.Background()
	dataDir := filepath.Join(s.dataDir, "inspect")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	proxy := s.tcfg.FixtureProxy
	opts := func(f string) inspect.Options {
		return inspect.Options{Options: workflow.Options{Dir: s.mods[f], FixtureProxy: proxy, DataDir: dataDir, Owner: s.tcfg.Owner, LockTimeout: 10 * time.Minute}}
	}
	var seedNote string
	for _, f := range fixtures {
		t0 := time.Now()
		rep, err := inspect.Inspect(ctx, s.eng, opts(f))
		if err != nil {
			s.t.Fatalf("inspect %s: %v", f, err)
		}
		for _, n := range rep.Notes {
			if strings.Contains(n, "seed") {
				seedNote = fmt.Sprintf("%s (first inspect, %v in all)", n, time.Since(t0).Round(time.Second))
			}
		}
	}
	hostMods := s.dir777(filepath.Join(dataDir, "host-modcache"))
	type pair struct{ ctr, host, hostBeside []time.Duration }
	res := map[string]*pair{}
	for r := 0; r < rounds; r++ {
		for _, f := range fixtures {
			p := res[f]
			if p == nil {
				p = &pair{}
				res[f] = p
			}
			t0 := time.Now()
			if _, err := inspect.Inspect(ctx, s.eng, opts(f)); err != nil {
				s.t.Fatalf("inspect %s: %v", f, err)
			}
			p.ctr = append(p.ctr, time.Since(t0))
			p.host = append(p.host, s.hostInspect(ctx, f, proxy, hostMods, r == 0, false))
			p.hostBeside = append(p.hostBeside, s.hostInspect(ctx, f, proxy, hostMods, false, true))
		}
	}
	if seedNote != "" {
		tb.title("Inspect's own seed: %s.", seedNote)
	}
	tb.section("Whole inspect (inspect.Inspect, seeded) vs the host running its commands with the same cache state, one after another and with the candidate listing beside the validation as inspect runs it: median wall time",
		"fixture", "stockade inspect", "host", "inspect/host", "host, listing beside", "inspect/host beside")
	for _, f := range fixtures {
		c, h, hb := median(res[f].ctr), median(res[f].host), median(res[f].hostBeside)
		tb.row(f, secs(c), secs(h), ratio(c, h), secs(hb), ratio(c, hb))
	}
}

// hostInspect runs on the host what inspect runs in containers: a copy of
// the module (the snapshot), go mod download, the validation with a fresh
// seeded cache, and the candidates listing (with beside, in a goroutine
// started with the validation, as inspect does). The first call fills the
// module cache untimed.
func (s *suite) hostInspect(ctx context.Context, f, proxy, modCache string, first, beside bool) time.Duration {
	home := s.tempDir("home-")
	defer os.RemoveAll(home)
	env := []string{
		"PATH=" + filepath.Join(runtime.GOROOT(), "bin") + ":/usr/bin:/bin",
		"HOME=" + home, "TMPDIR=" + home,
		"GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=file://" + proxy, "GOSUMDB=off", "GOPRIVATE=",
		"GOMODCACHE=" + modCache, "CGO_ENABLED=0",
	}
	if first {
		if out, err := (hostExecer{dir: s.mods[f], env: append(env, "GOCACHE="+filepath.Join(home, "c"))}).Exec(ctx, []string{"go", "mod", "download"}, 10*time.Minute); err != nil || out.ExitCode != 0 {
			s.t.Fatalf("host go mod download: %v %s", err, out.Stderr)
		}
	}
	t0 := time.Now()
	snap := filepath.Join(home, "snap")
	copyTree(s.t, s.mods[f], snap)
	m, _, err := gomod.Check(snap, imagetable.Default(), nil)
	if err != nil {
		s.t.Fatalf("gomod.Check: %v", err)
	}
	cache := s.newCache()
	x := hostExecer{dir: snap, env: append(env, "GOCACHE="+cache, "GOCACHEPROG="+s.hostProg+" "+filepath.Join(s.seed.Dir, "cache"))}
	if out, err := x.Exec(ctx, []string{"go", "mod", "download"}, 10*time.Minute); err != nil || out.ExitCode != 0 {
		s.t.Fatalf("host go mod download: %v %s", err, out.Stderr)
	}
	listed := make(chan error, 1)
	list := func() {
		_, _, err := workflow.Candidates(ctx, x, m.Direct(), workflow.Cooldown{})
		listed <- err
	}
	if beside {
		go list()
	}
	if _, err := validate.Run(ctx, x, validate.Options{Timeout: 30 * time.Minute}); err != nil {
		s.t.Fatal(err)
	}
	if !beside {
		list()
	}
	if err := <-listed; err != nil {
		s.t.Fatal(err)
	}
	return time.Since(t0)
}

// run is one measured validation.
type run struct {
	setup, work, teardown time.Duration
	steps                 map[string]time.Duration
	verdict               string // check statuses and finding keys
	written               int    // cache entries the validation wrote (misses)
}

func total(r run) time.Duration { return r.setup + r.work + r.teardown }

func step(name string) func(run) time.Duration {
	return func(r run) time.Duration { return r.steps[name] }
}

// container validates fixture f in a long-lived execute container (the
// spec toolchain.NewSpec gives, plus the seed's mount) with cache as its
// build cache, through validate.Run.
func (s *suite) container(ctx context.Context, f, cache string, seed cacheseed.Seed) run {
	t := s.t
	before := countEntries(cache)
	job := toolchain.Job{Profile: toolchain.Execute, Cmd: []string{"sleep", "3600"}, Source: s.mods[f], ModCache: s.modCache, BuildCache: cache, Env: seed.Env(), ReadOnly: seed.Mounts(), Timeout: time.Hour}
	spec, err := toolchain.NewSpec(s.tcfg, job)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := spec.Config()
	if err != nil {
		t.Fatal(err)
	}
	var r run
	t0 := time.Now()
	id, err := s.eng.ContainerCreate(ctx, container.RandomName("bench"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.eng.ContainerRemove(context.WithoutCancel(ctx), id, dockerapi.RemoveOptions{Force: true})
	if err := s.eng.ContainerStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	r.setup = time.Since(t0)
	t1 := time.Now()
	res, err := validate.Run(ctx, execer{eng: s.eng, id: id}, validate.Options{Timeout: 30 * time.Minute})
	if err != nil {
		t.Fatalf("validate %s: %v", f, err)
	}
	r.work = time.Since(t1)
	t2 := time.Now()
	if err := s.eng.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	r.teardown = time.Since(t2)
	r.fill(res)
	r.written = countEntries(cache) - before
	return r
}

// host validates fixture f with the host's go command, the same commands
// and the same cache state, reading the same seed through the same program.
func (s *suite) host(ctx context.Context, f, cache string, seed cacheseed.Seed) run {
	before := countEntries(cache)
	home := s.tempDir("home-")
	defer os.RemoveAll(home)
	env := []string{
		"PATH=" + filepath.Join(runtime.GOROOT(), "bin") + ":/usr/bin:/bin",
		"HOME=" + home, "TMPDIR=" + home,
		"GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=off", "GOSUMDB=off", "GOPRIVATE=",
		"GOMODCACHE=" + s.modCache, "GOCACHE=" + cache, "CGO_ENABLED=0",
	}
	if seed.Valid() {
		env = append(env, "GOCACHEPROG="+s.hostProg+" "+filepath.Join(seed.Dir, "cache"))
	}
	var r run
	t0 := time.Now()
	res, err := validate.Run(ctx, hostExecer{dir: s.mods[f], env: env}, validate.Options{Timeout: 30 * time.Minute})
	if err != nil {
		s.t.Fatalf("host validate %s: %v", f, err)
	}
	r.work = time.Since(t0)
	r.fill(res)
	r.written = countEntries(cache) - before
	return r
}

func (r *run) fill(res validate.Result) {
	r.steps = map[string]time.Duration{}
	for _, p := range res.Phases {
		r.steps[strings.TrimPrefix(p.Name, "validate/")] = time.Duration(p.MS) * time.Millisecond
	}
	var b strings.Builder
	for _, c := range res.Checks {
		fmt.Fprintf(&b, "%s:%s:%d:%d", c.Name, c.Status, c.ExitCode, len(c.Reasons))
		keys := make([]string, 0, len(c.Findings))
		for _, f := range c.Findings {
			keys = append(keys, findingKey(f))
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "%v;", keys)
	}
	r.verdict = b.String()
}

func findingKey(f report.Finding) string { return f.Key }

// execer runs a validation step as an exec in a running container, as
// toolchain.Container.Exec does.
type execer struct {
	eng *dockerapi.Client
	id  string
}

func (x execer) Exec(ctx context.Context, argv []string, timeout time.Duration) (validate.Output, error) {
	res, err := container.Exec(ctx, x.eng, x.id, container.ExecSpec{Argv: argv, User: toolchain.ContainerUser, Timeout: timeout, OutputCap: toolchain.DefaultOutputCap})
	if err != nil {
		return validate.Output{}, err
	}
	return validate.Output{Stdout: res.Stdout, Stderr: res.Stderr, Truncated: res.Truncated(), ExitCode: res.ExitCode, TimedOut: res.TimedOut}, nil
}

// hostExecer runs a validation step with the host's go command.
type hostExecer struct {
	dir string
	env []string
}

func (h hostExecer) Exec(ctx context.Context, argv []string, timeout time.Duration) (validate.Output, error) {
	if timeout <= 0 {
		timeout = 10 * time.Minute // the runner's default, as in validate.Execer
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = h.dir, h.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := validate.Output{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if ee, ok := err.(*exec.ExitError); ok {
		out.ExitCode = ee.ExitCode()
	} else if err != nil {
		return out, err
	}
	return out, nil
}

// overhead measures what one container costs per profile (create, start,
// wait, logs, remove of `true`), and one exec in a running container.
func (s *suite) overhead(tb *table, rounds int) {
	ctx := context.Background()
	n := max(rounds, 5)
	scratch := s.tempDir("overhead-")
	defer s.removeTree(scratch)
	jobs := map[toolchain.Profile]toolchain.Job{
		toolchain.Acquire: {Source: s.mods["clean"], ModCache: s.dir777(filepath.Join(scratch, "mc-a"))},
		toolchain.Mutate:  {Source: s.mods["clean"], ModCache: s.dir777(filepath.Join(scratch, "mc-m")), Staging: s.dir777(filepath.Join(scratch, "staging"))},
		toolchain.Execute: {Source: s.mods["clean"], ModCache: s.modCache},
		toolchain.Tool:    {ModCache: s.dir777(filepath.Join(scratch, "mc-t")), Tools: s.dir777(filepath.Join(scratch, "tools"))},
	}
	tb.section(fmt.Sprintf("Per-container overhead of each profile: `true` (acquire, mutate: `go version`) in a one-shot container (container.Run), median of %d", n),
		"profile", "create", "start", "wait", "logs", "remove", "total", "total/seeded validation (clean)")
	seededClean := medianOf([]run{s.container(ctx, "clean", s.newCache(), s.seed)}, total)
	for _, p := range toolchain.Profiles {
		var ph []container.Phases
		for i := 0; i < n; i++ {
			j := jobs[p]
			j.Profile, j.Cmd = p, []string{"true"}
			if p == toolchain.Acquire || p == toolchain.Mutate {
				j.Cmd = []string{"go", "version"} // they run module commands only
			}
			j.BuildCache = s.dir777(filepath.Join(scratch, fmt.Sprintf("bc-%s-%d", p, i)))
			res, err := s.runJob(ctx, j)
			if err != nil || res.ExitCode != 0 {
				s.t.Fatalf("%s: %v exit %d %s", p, err, res.ExitCode, res.Stderr)
			}
			ph = append(ph, res.Phases)
		}
		pick := func(f func(container.Phases) time.Duration) time.Duration {
			ds := make([]time.Duration, len(ph))
			for i, p := range ph {
				ds[i] = f(p)
			}
			return median(ds)
		}
		tot := pick(func(p container.Phases) time.Duration { return p.Create + p.Start + p.Wait + p.Logs + p.Remove })
		tb.row(string(p), ms(pick(func(p container.Phases) time.Duration { return p.Create })), ms(pick(func(p container.Phases) time.Duration { return p.Start })),
			ms(pick(func(p container.Phases) time.Duration { return p.Wait })), ms(pick(func(p container.Phases) time.Duration { return p.Logs })),
			ms(pick(func(p container.Phases) time.Duration { return p.Remove })), ms(tot), pct(tot, seededClean))
	}
	// One exec in a running execute container: the cost of a step that
	// shares its validation's container instead of having its own.
	spec, err := toolchain.NewSpec(s.tcfg, toolchain.Job{Profile: toolchain.Execute, Cmd: []string{"sleep", "600"}, Source: s.mods["clean"], ModCache: s.modCache, BuildCache: s.dir777(filepath.Join(scratch, "bc-exec"))})
	if err != nil {
		s.t.Fatal(err)
	}
	cfg, _ := spec.Config()
	id, err := s.eng.ContainerCreate(ctx, container.RandomName("bench"), cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	defer s.eng.ContainerRemove(context.WithoutCancel(ctx), id, dockerapi.RemoveOptions{Force: true})
	if err := s.eng.ContainerStart(ctx, id); err != nil {
		s.t.Fatal(err)
	}
	var ds []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if out, err := (execer{eng: s.eng, id: id}).Exec(ctx, []string{"true"}, time.Minute); err != nil || out.ExitCode != 0 {
			s.t.Fatalf("exec: %v %d", err, out.ExitCode)
		}
		ds = append(ds, time.Since(t0))
	}
	tb.row("execute, exec in a running container", "", "", "", "", "", ms(median(ds)), pct(median(ds), seededClean))
}

// sessions measures the session API (sandbox/docker) beside the docker CLI
// doing the same: provision to first exec, exec, writing 1000 files,
// writing and reading 1 MiB.
func (s *suite) sessions(tb *table, rounds int) {
	ctx := context.Background()
	n := max(rounds, 5)
	const nFiles, fileSize = 1000, 100
	big := bytes.Repeat([]byte("x"), 1<<20)

	var api [5][]time.Duration
	prov, err := sdocker.New(sdocker.Config{Owner: s.tcfg.Owner})
	if err != nil {
		s.t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		t0 := time.Now()
		sb, err := prov.Provision(ctx, sandbox.Spec{SessionID: domain.ID(fmt.Sprintf("bench-%s-%d", container.RandomHex(4), i)), Image: s.img.ID})
		if err != nil {
			s.t.Fatalf("Provision: %v", err)
		}
		exec1 := func() {
			if r, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil || r.ExitCode != 0 {
				s.t.Fatalf("Exec: %v %+v", err, r)
			}
		}
		exec1()
		api[0] = append(api[0], time.Since(t0))
		t0 = time.Now()
		exec1()
		api[1] = append(api[1], time.Since(t0))
		fw := make([]sandbox.FileWrite, nFiles)
		for j := range fw {
			fw[j] = sandbox.FileWrite{Path: fmt.Sprintf("%s/files/f%04d.txt", sandbox.DefaultWorkdir, j), Data: bytes.Repeat([]byte("y"), fileSize)}
		}
		t0 = time.Now()
		if err := sb.WriteFiles(ctx, fw); err != nil {
			s.t.Fatalf("WriteFiles: %v", err)
		}
		api[2] = append(api[2], time.Since(t0))
		t0 = time.Now()
		if err := sb.WriteFile(ctx, sandbox.DefaultWorkdir+"/big", big); err != nil {
			s.t.Fatalf("WriteFile: %v", err)
		}
		api[3] = append(api[3], time.Since(t0))
		t0 = time.Now()
		if got, err := sb.ReadFile(ctx, sandbox.DefaultWorkdir+"/big"); err != nil || len(got) != len(big) {
			s.t.Fatalf("ReadFile: %v, %d bytes", err, len(got))
		}
		api[4] = append(api[4], time.Since(t0))
		if err := sb.Destroy(ctx); err != nil {
			s.t.Errorf("Destroy: %v", err)
		}
	}

	var cli [5][]time.Duration
	if _, err := exec.LookPath("docker"); err == nil {
		docker := func(stdin io.Reader, args ...string) []byte {
			cmd := exec.Command("docker", args...)
			cmd.Stdin = stdin
			out, err := cmd.Output()
			if err != nil {
				s.t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
			}
			return out
		}
		files := filesTar(s.t, nFiles, fileSize)
		bigTar := singleTar(s.t, "big", big)
		for i := 0; i < n; i++ {
			t0 := time.Now()
			id := strings.TrimSpace(string(docker(nil, "run", "-d", "--rm", "--network", "none", "--user", "65534:65534",
				"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--tmpfs", "/tmp:exec", "-v", sandbox.DefaultWorkdir,
				"--label", "io.stockade.managed=true", "--label", "io.stockade.owner="+s.tcfg.Owner, s.img.ID, "sleep", "600")))
			docker(nil, "exec", id, "true")
			cli[0] = append(cli[0], time.Since(t0))
			t0 = time.Now()
			docker(nil, "exec", id, "true")
			cli[1] = append(cli[1], time.Since(t0))
			t0 = time.Now()
			docker(bytes.NewReader(files), "cp", "-", id+":"+sandbox.DefaultWorkdir)
			cli[2] = append(cli[2], time.Since(t0))
			t0 = time.Now()
			docker(bytes.NewReader(bigTar), "cp", "-", id+":"+sandbox.DefaultWorkdir)
			cli[3] = append(cli[3], time.Since(t0))
			t0 = time.Now()
			if got := docker(nil, "cp", id+":"+sandbox.DefaultWorkdir+"/big", "-"); len(got) < 1<<20 {
				s.t.Fatalf("docker cp read %d bytes", len(got))
			}
			cli[4] = append(cli[4], time.Since(t0))
			docker(nil, "rm", "-f", "-v", id)
		}
	}
	tb.section(fmt.Sprintf("Session operations (sandbox/docker vs the docker CLI doing the same), median of %d", n),
		"operation", "sandbox/docker", "docker CLI", "API/CLI")
	for i, name := range []string{"provision to first exec", "exec `true`", fmt.Sprintf("WriteFiles %d files of %d B", nFiles, fileSize), "WriteFile 1 MiB", "ReadFile 1 MiB"} {
		a, c := median(api[i]), median(cli[i])
		tb.row(name, ms(a), ms(c), ratio(a, c))
	}
}

func filesTar(t *testing.T, n, size int) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := bytes.Repeat([]byte("y"), size)
	tw.WriteHeader(&tar.Header{Name: "files/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: 65534, Gid: 65534})
	for i := 0; i < n; i++ {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("files/f%04d.txt", i), Mode: 0o644, Size: int64(size), Uid: 65534, Gid: 65534})
		tw.Write(data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func singleTar(t *testing.T, name string, data []byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Uid: 65534, Gid: 65534})
	tw.Write(data)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// runJob runs a one-shot job with toolchain's spec.
func (s *suite) runJob(ctx context.Context, j toolchain.Job) (container.Result, error) {
	spec, err := toolchain.NewSpec(s.tcfg, j)
	if err != nil {
		return container.Result{}, err
	}
	return container.Run(ctx, s.eng, spec, container.RunOptions{Name: container.RandomName("bench"), Timeout: 10 * time.Minute})
}

// linkFarm makes a fresh cache of hard links to (a copy of) the seed's
// files, as the rejected design would, and returns it; the time it took is
// in s.linkTimes.
func (s *suite) linkFarm() string {
	dir := s.newCache()
	src := s.farmSrc
	t0 := time.Now()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o777)
		}
		return os.Link(p, filepath.Join(dir, rel))
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.linkTimes = append(s.linkTimes, time.Since(t0))
	return dir
}

// newCache makes a fresh, randomly named cache directory.
func (s *suite) newCache() string {
	parent := s.dir777(filepath.Join(s.dataDir, "caches"))
	dir, err := container.MkdirFresh(parent, "cache", 0o777)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { s.removeTree(dir) })
	return dir
}

func (s *suite) tempDir(prefix string) string {
	d, err := os.MkdirTemp(s.dataDir, prefix)
	if err != nil {
		s.t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	return d
}

func (s *suite) dir777(d string) string {
	if err := os.MkdirAll(d, 0o777); err != nil {
		s.t.Fatal(err)
	}
	os.Chmod(d, 0o777)
	return d
}

// removeTree removes what the bench made; what the container user wrote
// and the host user cannot remove is emptied by a container first.
func (s *suite) removeTree(d string) {
	if os.RemoveAll(d) == nil {
		return
	}
	spec, err := container.ToolchainSpec(container.Scope{Owner: s.tcfg.Owner, Run: s.tcfg.RunID, DataDir: s.tcfg.DataDirID}, container.PurposeCleanup, s.img.ID, 5*time.Minute, []string{"sh", "-c", "rm -rf /d/* /d/.[!.]*"})
	if err != nil {
		s.t.Fatal(err)
	}
	spec.Mounts = append(spec.Mounts, container.Mount{Type: container.Bind, Source: d, Target: "/d", Writable: true})
	res, err := container.Run(context.Background(), s.eng, spec, container.RunOptions{Timeout: 6 * time.Minute})
	if err != nil || res.ExitCode != 0 {
		s.t.Logf("cleanup of %s: %v %s", d, err, res.Stderr)
	}
	os.RemoveAll(d)
}

// countEntries counts the index entries (xx/*-a) in a cache directory:
// after a validation, the ones it added are its cache misses.
func countEntries(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, "-a") {
			n++
		}
		return nil
	})
	return n
}

func copyTree(t *testing.T, src, dst string) {
	if err := hosttest.CopyTree(src, dst); err != nil {
		t.Fatal(err)
	}
}

// repoPath returns a path relative to the repository root.
func repoPath(t *testing.T, rel string) string {
	abs, err := filepath.Abs(filepath.Join("..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func machine(t *testing.T, eng *dockerapi.Client) string {
	info, err := eng.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load := ""
	if l := loadAvg(); l != "" {
		load = ", load average at start " + l
	}
	return fmt.Sprintf("%s, %d CPUs, %.0f GiB; engine %s (%s, %s, cgroup %s)%s; host %s",
		model, info.NCPU, float64(info.MemTotal)/(1<<30), info.ServerVersion, info.OperatingSystem, info.Driver, info.CgroupVersion, load, runtime.Version())
}

func short(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianOf(rs []run, f func(run) time.Duration) time.Duration {
	ds := make([]time.Duration, len(rs))
	for i, r := range rs {
		ds[i] = f(r)
	}
	return median(ds)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
func ms(d time.Duration) string   { return fmt.Sprintf("%d ms", d.Milliseconds()) }
func ratio(a, b time.Duration) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}
func pct(a, b time.Duration) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

// table renders sections of Markdown tables.
type table struct{ b strings.Builder }

func (t *table) title(format string, args ...any) { fmt.Fprintf(&t.b, format+"\n\n", args...) }

func (t *table) section(title string, cols ...string) {
	fmt.Fprintf(&t.b, "\n%s\n\n| %s |\n|%s\n", title, strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
}

func (t *table) row(cells ...string) { fmt.Fprintf(&t.b, "| %s |\n", strings.Join(cells, " | ")) }

func (t *table) String() string { return t.b.String() }
