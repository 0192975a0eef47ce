package cacheseed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/image"
)

// Paths inside the seed container.
const (
	srcTarget   = "/src" // generated sources, read-only
	outTarget   = "/out" // what the build keeps, writable
	buildCache  = outTarget + "/cache"
	progOut     = outTarget + "/bin/cacheprog"
	warmModule  = "stockade.local/seedwarm"
	progModule  = "stockade.local/cacheprog"
	indexFile   = "index" // the seed's index in its cache, as cacheprog -index writes it
	warmPackage = "seedwarm"
)

// skipStd are standard packages the warm-up module does not import: they
// only build in modes validations do not use (cgo, the race and memory
// sanitizers, js/wasm).
var skipStd = map[string]bool{
	"runtime/cgo":  true,
	"runtime/race": true,
	"runtime/msan": true,
	"runtime/asan": true,
	"syscall/js":   true,
}

// stepTimeout bounds each step of the recipe. Unloaded, the longest (the
// build) takes two minutes with two CPUs; on a machine shared with other
// work it has taken over ten.
const stepTimeout = 30 * time.Minute

// step is one toolchain command of the recipe.
type step struct {
	name    string
	dir     string // working directory in the container
	args    []string
	env     map[string]string // added to the common environment
	okExits []int             // exit codes that still count as success
	timeout time.Duration
}

// build runs the recipe into a temporary directory next to dir, turns its
// cache into the read-only seed, and renames it to dir.
func build(ctx context.Context, eng container.Engine, cfg Config, key, dir string) (Meta, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("image", cfg.Image)
	start := time.Now()
	seeds := filepath.Dir(dir)
	// The work directory is named by the key alone, so a build that failed
	// (a timeout on a loaded machine, a crash) leaves its cache for the
	// next attempt, which we hold the lock for. Only seed builds of this
	// key ever mount it, so what it holds is as trusted as a finished seed,
	// and the go command's cache tolerates entries cut short (a body of the
	// wrong size, an index entry without a body, are misses).
	work := filepath.Join(seeds, ".build-"+key)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return Meta{}, fmt.Errorf("cacheseed: %w", err)
	}
	succeeded := false
	defer func() {
		if succeeded {
			removeBuild(context.WithoutCancel(ctx), eng, cfg, work, log)
		} else {
			log.Warn("seed build failed; its cache is kept for the next attempt", "dir", work)
		}
	}()

	src, out := filepath.Join(work, "src"), filepath.Join(work, "out")
	for _, d := range []string{src, filepath.Join(src, "warm"), filepath.Join(src, "cacheprog")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return Meta{}, fmt.Errorf("cacheseed: %w", err)
		}
	}
	// out and its children are created by us, writable by the container
	// user: what it writes directly in them we can remove.
	for _, d := range []string{out, filepath.Join(out, "cache"), filepath.Join(out, "bin")} {
		if err := mkdirAll0777(d); err != nil {
			return Meta{}, err
		}
	}
	// The work directory is ours (0700) but must be traversable for the
	// bind mounts on engines that check the path as the container user.
	if err := os.Chmod(work, 0o755); err != nil {
		return Meta{}, fmt.Errorf("cacheseed: %w", err)
	}
	if err := writeFiles(filepath.Join(src, "cacheprog"), map[string][]byte{
		"go.mod":  []byte("module " + progModule + "\n\ngo 1.24\n"),
		"main.go": progSource,
	}); err != nil {
		return Meta{}, err
	}

	r := &runner{eng: eng, cfg: cfg, src: src, out: out, log: log, lim: cfg.Limits.Or(container.ToolchainLimits())}
	if in, ok := eng.(container.Infoer); ok && cfg.Limits.NanoCPUs <= 0 {
		var cpus container.CPUs
		if lim, err := cpus.Clamp(ctx, in, r.lim); err == nil {
			r.lim = lim
		}
	}

	// 1. What the standard library holds, as this image builds it.
	res, err := r.run(ctx, step{name: "list", dir: "/", args: []string{"go", "list", "-e", "-f", "{{.ImportPath}}{{if .Error}} ERR{{end}}", "std"}, timeout: stepTimeout})
	if err != nil {
		return Meta{}, err
	}
	pkgs := stdPackages(res.Stdout)
	if len(pkgs) == 0 {
		return Meta{}, fmt.Errorf("%w: go list std listed no packages", ErrBuild)
	}
	if err := writeFiles(filepath.Join(src, "warm"), warmFiles(cfg.GoVersion, pkgs)); err != nil {
		return Meta{}, err
	}

	// 2. What validations do, over a module that imports every package:
	// build compiles them; vet computes their facts with go vet's analyzer
	// set; test compiles the test main and computes their facts with go
	// test's set (its vet flags differ, so its keys do).
	steps := []step{{name: "build", dir: srcTarget + "/warm", args: []string{"go", "build", "./..."}, timeout: stepTimeout}}
	vet := append([]string{"go", "vet"}, cfg.Settings.VetFlags...)
	// Exit 1 is vet reporting findings in our module: there are none, but
	// a future analyzer might find one in a blank import file; the facts of
	// the dependencies are cached either way.
	steps = append(steps, step{name: "vet", dir: srcTarget + "/warm", args: append(vet, "./..."), okExits: []int{1}, timeout: stepTimeout})
	test := []string{"go", "test", "-json", "-count=1", "-run=^$"}
	if cfg.Settings.TestVet != "" {
		test = append(test, "-vet="+cfg.Settings.TestVet)
	}
	steps = append(steps, step{name: "test", dir: srcTarget + "/warm", args: append(test, "./..."), timeout: stepTimeout})
	// 3. The GOCACHEPROG program, static. It shares the seed's cache: with
	// the usual CGO_ENABLED=0 its dependencies are already compiled, and
	// under other settings its entries are just more trusted entries. No
	// -trimpath: it would change the key of every dependency.
	steps = append(steps, step{
		name: "cacheprog", dir: srcTarget + "/cacheprog",
		args:    []string{"go", "build", "-o", progOut, "."},
		env:     map[string]string{"CGO_ENABLED": "0", "GOFLAGS": "-mod=mod", "GOOS": "", "GOARCH": ""},
		timeout: stepTimeout,
	})
	// 4. The seed's index, which cacheprog loads at startup instead of
	// reading two files per lookup: written last, so it lists every entry
	// the steps above left, each checked to have its body.
	steps = append(steps, step{name: "index", dir: "/", args: []string{progOut, "-index", buildCache}, timeout: stepTimeout})
	for _, s := range steps {
		if _, err := r.run(ctx, s); err != nil {
			return Meta{}, err
		}
	}

	// 5. The host's read-only copy, in a temporary directory renamed into
	// place. A copy a crashed build left is removed first: we hold the
	// key's lock, so no one else writes one.
	removeStaleCopies(seeds, key, log)
	tmp, err := os.MkdirTemp(seeds, ".seed-"+key+"-")
	if err != nil {
		return Meta{}, fmt.Errorf("cacheseed: %w", err)
	}
	defer func() {
		if tmp != "" {
			makeWritable(tmp)
			os.RemoveAll(tmp)
		}
	}()
	files, bytes, err := copyCache(filepath.Join(out, "cache"), filepath.Join(tmp, "cache"))
	if err != nil {
		return Meta{}, err
	}
	if err := copyFile(filepath.Join(out, "cache", indexFile), filepath.Join(tmp, "cache", indexFile), 0o444); err != nil {
		return Meta{}, err
	}
	if err := copyFile(filepath.Join(out, "bin", "cacheprog"), filepath.Join(tmp, "bin", "cacheprog"), 0o555); err != nil {
		return Meta{}, err
	}
	meta := Meta{
		Key: key, Image: cfg.Image, GoVersion: cfg.GoVersion, Settings: cfg.Settings,
		Packages: len(pkgs), Files: files, Bytes: bytes,
		Created: time.Now().UTC(), BuildTime: time.Since(start),
	}
	mb, err := json.MarshalIndent(meta, "", "\t")
	if err != nil {
		return Meta{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, metaFile), append(mb, '\n'), 0o444); err != nil {
		return Meta{}, fmt.Errorf("cacheseed: %w", err)
	}
	if err := readOnly(tmp); err != nil {
		return Meta{}, err
	}
	// The top directory stays writable until it has its final name
	// (renaming a directory rewrites its "..").
	if err := os.Rename(tmp, dir); err != nil {
		return Meta{}, fmt.Errorf("cacheseed: %w", err)
	}
	tmp = ""
	if err := os.Chmod(dir, 0o555); err != nil {
		return Meta{}, fmt.Errorf("cacheseed: %w", err)
	}
	succeeded = true
	log.Info("seed built", "phase", "seed", "dur", meta.BuildTime, "files", files, "bytes", bytes, "packages", len(pkgs))
	return meta, nil
}

// runner runs the recipe's steps, each in its own one-shot container with
// the same mounts.
type runner struct {
	eng      container.Engine
	cfg      Config
	src, out string
	lim      container.Limits // clamped to the engine's CPUs
	log      *slog.Logger
}

// spec is the named toolchain spec of a seed build step (purpose
// container.PurposeSeedBuild), labelled with the data directory so a
// crashed build's containers are reaped with it, and ended in the
// container at the step's timeout.
func (r *runner) spec(s step) (container.Spec, error) {
	// The environment of every go command in a toolchain image, and what
	// the seed's build adds: its cache, and no network at all.
	env := image.GoEnv()
	env["GOCACHE"] = buildCache
	env["GOPROXY"], env["GOSUMDB"] = "off", "off"
	env["GOPATH"], env["GOMODCACHE"] = "/tmp/gopath", "/tmp/gopath/pkg/mod"
	for k, v := range r.cfg.Settings.Env() {
		env[k] = v
	}
	for k, v := range s.env {
		if v == "" {
			delete(env, k)
		} else {
			env[k] = v
		}
	}
	spec, err := container.ToolchainSpec(r.cfg.scope(), container.PurposeSeedBuild, r.cfg.Image, s.timeout, s.args)
	if err != nil {
		return spec, err
	}
	for k, v := range r.cfg.Labels {
		if _, set := spec.Labels[k]; !set {
			spec.Labels[k] = v
		}
	}
	spec.Env, spec.Workdir, spec.Limits = env, s.dir, r.lim
	spec.Mounts = append(spec.Mounts,
		container.Mount{Type: container.Bind, Source: r.src, Target: srcTarget},
		container.Mount{Type: container.Bind, Source: r.out, Target: outTarget, Writable: true})
	return spec, nil
}

func (r *runner) run(ctx context.Context, s step) (container.Result, error) {
	spec, err := r.spec(s)
	if err != nil {
		return container.Result{}, fmt.Errorf("cacheseed: %s: %w", s.name, err)
	}
	t := time.Now()
	res, err := container.Run(ctx, r.eng, spec, container.RunOptions{
		Name:      container.RandomName("seed"),
		Timeout:   s.timeout + hostGrace,
		OutputCap: listCap,
		Logger:    r.log,
	})
	r.log.Info("seed step", "phase", s.name, "exit", res.ExitCode, "dur", time.Since(t))
	if err != nil {
		return res, fmt.Errorf("cacheseed: %s: %w", s.name, err)
	}
	ok := res.ExitCode == 0
	for _, c := range s.okExits {
		ok = ok || res.ExitCode == c
	}
	if !ok || res.TimedOut || res.OOMKilled {
		return res, fmt.Errorf("%w: %s: exit %d (timed out %v, oom %v): %s", ErrBuild, s.name, res.ExitCode, res.TimedOut, res.OOMKilled, tail(res.Stderr, 2000))
	}
	return res, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// stdPackages returns the importable packages `go list std` printed: no
// internal or vendored packages, none that failed to load, none of skipStd.
func stdPackages(out []byte) []string {
	var pkgs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasSuffix(p, " ERR") || skipStd[p] || strings.HasPrefix(p, "vendor/") {
			continue
		}
		if p == "internal" || strings.HasPrefix(p, "internal/") || strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") {
			continue
		}
		if strings.ContainsAny(p, " \"\\`") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	return pkgs
}

// warmFiles is the warm-up module: one package that imports pkgs and has one
// empty test.
func warmFiles(goVersion string, pkgs []string) map[string][]byte {
	lang := "1.24"
	if maj, min, ok := goMinor(goVersion); ok {
		lang = fmt.Sprintf("%d.%d", maj, min)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// Package %s imports the standard library so that building, vetting\n// and testing it warms a build cache. Generated by cacheseed.\npackage %s\n\nimport (\n", warmPackage, warmPackage)
	for _, p := range pkgs {
		fmt.Fprintf(&b, "\t_ %q\n", p)
	}
	b.WriteString(")\n")
	test := "package " + warmPackage + "\n\nimport \"testing\"\n\nfunc TestWarm(t *testing.T) {}\n"
	return map[string][]byte{
		"go.mod":       []byte("module " + warmModule + "\n\ngo " + lang + "\n"),
		"warm.go":      []byte(b.String()),
		"warm_test.go": []byte(test),
	}
}

func writeFiles(dir string, files map[string][]byte) error {
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("cacheseed: %w", err)
		}
	}
	return nil
}

func mkdirAll0777(d string) error {
	if err := os.MkdirAll(d, 0o777); err != nil {
		return fmt.Errorf("cacheseed: %w", err)
	}
	// Chmod: the umask narrowed Mkdir's mode.
	if err := os.Chmod(d, 0o777); err != nil {
		return fmt.Errorf("cacheseed: %w", err)
	}
	return nil
}

// copyCache copies the cache entries (xx/<hex>-a and xx/<hex>-d) of the
// container-written cache src into dst, as files of ours. The go command's
// bookkeeping files (README, trim.txt) are left out.
func copyCache(src, dst string) (files int, size int64, err error) {
	subdirs, err := os.ReadDir(src)
	if err != nil {
		return 0, 0, fmt.Errorf("cacheseed: %w", err)
	}
	for _, sd := range subdirs {
		if !sd.IsDir() || !isHex(sd.Name(), 2) {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(src, sd.Name()))
		if err != nil {
			return 0, 0, fmt.Errorf("cacheseed: %w", err)
		}
		for _, e := range entries {
			n := e.Name()
			if !e.Type().IsRegular() || !(strings.HasSuffix(n, "-a") || strings.HasSuffix(n, "-d")) || !isHex(n[:len(n)-2], 64) {
				continue
			}
			if err := copyFile(filepath.Join(src, sd.Name(), n), filepath.Join(dst, sd.Name(), n), 0o444); err != nil {
				return 0, 0, err
			}
			fi, err := e.Info()
			if err != nil {
				return 0, 0, fmt.Errorf("cacheseed: %w", err)
			}
			files++
			size += fi.Size()
		}
	}
	return files, size, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// copyFile copies a regular file, never following a symlink at src.
func copyFile(src, dst string, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("cacheseed: %w", err)
	}
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("cacheseed: %w", err)
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("cacheseed: %s is not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("cacheseed: %w", err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(dst, mode)
	}
	if err != nil {
		return fmt.Errorf("cacheseed: %w", err)
	}
	return nil
}

// readOnly makes every directory below root (not root itself) 0555.
func readOnly(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cacheseed: %w", err)
	}
	// Deepest first, so each chmod happens while its parent is writable.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i], 0o555); err != nil {
			return fmt.Errorf("cacheseed: %w", err)
		}
	}
	return nil
}

// makeWritable undoes readOnly so a tree of ours can be removed.
func makeWritable(root string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
}

// removeStaleCopies removes the temporary copies of key's seed that a
// build killed while copying left in seeds. Call it with key's lock held.
func removeStaleCopies(seeds, key string, log *slog.Logger) {
	stale, _ := filepath.Glob(filepath.Join(seeds, ".seed-"+key+"-*"))
	for _, d := range stale {
		makeWritable(d)
		if err := os.RemoveAll(d); err != nil {
			log.Warn("stale seed copy left behind", "dir", d, "err", err)
		}
	}
}

// Remove deletes the seed in dir (a Seed.Dir), which Ensure made read-only.
func Remove(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, metaFile)); err != nil {
		return fmt.Errorf("cacheseed: %s is not a seed: %w", dir, err)
	}
	os.Chmod(dir, 0o755)
	makeWritable(dir)
	return os.RemoveAll(dir)
}

// removeBuild removes the build's work directory. The directories the
// container user made (the cache's xx/) cannot be removed by a host user
// other than root; a container empties them first.
func removeBuild(ctx context.Context, eng container.Engine, cfg Config, work string, log *slog.Logger) {
	if err := os.RemoveAll(work); err == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	r := &runner{eng: eng, cfg: cfg, src: filepath.Join(work, "src"), out: filepath.Join(work, "out"), lim: container.ToolchainLimits().Clamp(1), log: log}
	if _, err := r.run(ctx, step{name: "clean", dir: "/", args: []string{"go", "clean", "-cache"}, timeout: time.Minute}); err != nil {
		log.Warn("seed build cleanup failed", "err", err)
	}
	if err := os.RemoveAll(work); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("seed build directory left behind", "dir", work, "err", err)
	}
}
