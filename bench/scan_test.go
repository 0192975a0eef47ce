package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/stockade/stockade/internal/inspect"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/scanner"
	"github.com/stockade/stockade/internal/vulndb/vulndbtest"
	"github.com/stockade/stockade/internal/vulnjson"
	"github.com/stockade/stockade/internal/workflow"
)

// scan measures `stockade scan` (inspect.Scan: layout
// check, image, scanner verification, lock, snapshot, probe, acquisition,
// the scan in execute) against the same govulncheck binary run on the
// host over a copy of the module, with the same database and the same
// cache state (a fresh build cache over the same seed, a module cache
// already filled), rounds interleaved. The modules are the scan fixture
// and a real one: Stockade itself (its committed tree, acquired through
// the real module proxy).
func (s *suite) scan(tb *table, rounds int) {
	ctx := context.Background()
	dataDir := filepath.Join(s.dataDir, "inspect")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	db := vulndbtest.Write(s.t, s.img.GoVersion)
	type module struct {
		name, dir, proxy string
	}
	fixture := s.tempDir("scan-fixture-")
	copyTree(s.t, repoPath(s.t, "testdata/repos/vuln"), fixture)
	// Stockade's committed tree, as a plain directory both sides read.
	self := s.tempDir("scan-self-")
	archive := exec.Command("sh", "-c", "git archive --format=tar HEAD | tar -x -C "+self)
	archive.Dir = repoPath(s.t, ".")
	if out, err := archive.CombinedOutput(); err != nil {
		s.t.Fatalf("git archive: %v\n%s", err, out)
	}
	mods := []module{
		{"testdata/repos/vuln", fixture, s.tcfg.FixtureProxy},
		{"stockade (this repository)", self, ""},
	}
	opts := func(m module) inspect.Options {
		return inspect.Options{Options: workflow.Options{Dir: m.dir, FixtureProxy: m.proxy, DataDir: dataDir, VulnDB: db, Owner: s.tcfg.Owner, LockTimeout: 10 * time.Minute}}
	}
	// Untimed: the scanner (built on first use), the seed, the vulns the
	// container finds, and the host's module cache.
	t0 := time.Now()
	sc, err := scanner.Ensure(ctx, s.eng, scanner.Config{DataDir: dataDir, Image: s.img.ID, GoVersion: s.img.GoVersion, Owner: s.tcfg.Owner, LockTimeout: 10 * time.Minute})
	if err != nil {
		s.t.Fatalf("scanner: %v", err)
	}
	if sc.Built {
		tb.title("Scanner built in this run: govulncheck %s in %v (Ensure wall time %v).", sc.Meta.Version, (time.Duration(sc.Meta.BuildMS) * time.Millisecond).Round(time.Second), time.Since(t0).Round(time.Second))
	}
	hostMods := s.dir777(filepath.Join(dataDir, "host-modcache-scan"))
	ctrFound := map[string]int{}
	for _, m := range mods {
		rep, err := inspect.Scan(ctx, s.eng, opts(m))
		if err != nil || rep.Vulns == nil || rep.Vulns.Status != report.ScanComplete {
			s.t.Fatalf("scan %s: %v %+v", m.name, err, rep)
		}
		ctrFound[m.name] = len(rep.Vulns.Vulns)
		s.hostScan(ctx, m.dir, m.proxy, hostMods, sc, db, true)
	}
	type pair struct{ ctr, host, scanStep []time.Duration }
	res := map[string]*pair{}
	hostFound := map[string]int{}
	for r := 0; r < rounds; r++ {
		for _, m := range mods {
			p := res[m.name]
			if p == nil {
				p = &pair{}
				res[m.name] = p
			}
			t0 := time.Now()
			rep, err := inspect.Scan(ctx, s.eng, opts(m))
			if err != nil {
				s.t.Fatalf("scan %s: %v", m.name, err)
			}
			p.ctr = append(p.ctr, time.Since(t0))
			for _, ph := range rep.Timings.Phases {
				if ph.Name == "scan" {
					p.scanStep = append(p.scanStep, time.Duration(ph.MS)*time.Millisecond)
				}
			}
			d, n := s.hostScan(ctx, m.dir, m.proxy, hostMods, sc, db, false)
			p.host = append(p.host, d)
			hostFound[m.name] = n
		}
	}
	tb.section(fmt.Sprintf("stockade scan vs govulncheck %s (the same binary) on the host, same database and cache state: median wall time", sc.Meta.Version),
		"module", "stockade scan", "of which the scan step", "host govulncheck", "scan/host", "vulns (stockade, host)")
	for _, m := range mods {
		p := res[m.name]
		c, h := median(p.ctr), median(p.host)
		tb.row(m.name, secs(c), secs(median(p.scanStep)), secs(h), ratio(c, h), fmt.Sprintf("%d, %d", ctrFound[m.name], hostFound[m.name]))
	}
}

// hostScan runs the stored scanner binary on the host over a copy of dir
// (as inspect scans a snapshot), with a fresh build cache over the seed and
// the module cache modCache, and returns its wall time (the copy included)
// and how many vulnerabilities it found. first fills the module cache,
// untimed.
func (s *suite) hostScan(ctx context.Context, dir, proxy, modCache string, sc scanner.Scanner, db string, first bool) (time.Duration, int) {
	home := s.tempDir("home-")
	defer os.RemoveAll(home)
	goproxy := "GOPROXY=file://" + proxy
	sumdb := "GOSUMDB=off"
	if proxy == "" {
		goproxy, sumdb = "GOPROXY=https://proxy.golang.org", "GOSUMDB=sum.golang.org"
	}
	env := []string{
		"PATH=" + filepath.Join(runtime.GOROOT(), "bin") + ":/usr/bin:/bin",
		"HOME=" + home, "TMPDIR=" + home,
		"GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", goproxy, sumdb, "GOPRIVATE=",
		"GOMODCACHE=" + modCache, "CGO_ENABLED=0",
	}
	if first {
		if out, err := (hostExecer{dir: dir, env: append(env, "GOCACHE="+filepath.Join(home, "c"))}).Exec(ctx, []string{"go", "mod", "download"}, 10*time.Minute); err != nil || out.ExitCode != 0 {
			s.t.Fatalf("host go mod download: %v %s", err, out.Stderr)
		}
		return 0, 0
	}
	t0 := time.Now()
	snap := filepath.Join(home, "snap")
	cp := exec.Command("cp", "-a", dir+"/.", snap)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		s.t.Fatal(err)
	}
	if out, err := cp.CombinedOutput(); err != nil {
		s.t.Fatalf("copy: %v\n%s", err, out)
	}
	x := hostExecer{dir: snap, env: append(env, "GOPROXY=off", "GOCACHE="+s.newCache(), "GOCACHEPROG="+s.hostProg+" "+filepath.Join(s.seed.Dir, "cache"))}
	out, err := x.Exec(ctx, []string{sc.Binary(), "-db", "file://" + db, "-format", "json", "./..."}, 10*time.Minute)
	d := time.Since(t0)
	if err != nil {
		s.t.Fatal(err)
	}
	parsed := vulnjson.Parse(vulnjson.Output{ExitCode: out.ExitCode, Stdout: out.Stdout, Stderr: out.Stderr})
	if parsed.Status != report.ScanComplete {
		s.t.Fatalf("host govulncheck: %v", parsed.Reasons)
	}
	return d, len(parsed.Vulns)
}
