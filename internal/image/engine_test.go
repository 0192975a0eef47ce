package image_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// buildBudget bounds one Build: the first upload of GOROOT takes seconds
// on a local engine, a slow disk or a VM-backed engine more.
const buildBudget = 5 * time.Minute

// hostGoVersion is what `go version` prints on the host, minus the platform.
func hostGoVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatalf("go env GOVERSION: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// Run times for the containers the tests start. Compiling std on a busy
// two-CPU machine running the other packages' tests takes minutes.
const (
	quickRun   = 2 * time.Minute
	compileRun = 15 * time.Minute
)

// run runs argv in a container from id with the defaults of
// internal/container (uid 65534, read-only root, no capabilities, no
// network) and a tmpfs /tmp, killing it after timeout.
func run(t *testing.T, c *dockerapi.Client, id string, timeout time.Duration, argv ...string) container.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := container.Spec{
		Image:  id,
		Cmd:    argv,
		Env:    map[string]string{"HOME": "/tmp", "GOCACHE": "/tmp/gocache", "GOFLAGS": "-mod=mod", "GOPROXY": "off"},
		Labels: label.Base(enginetest.Owner(t), label.KindProbe),
		Mounts: []container.Mount{{Type: container.Tmpfs, Target: "/tmp", Exec: true, SizeBytes: 1 << 30}},
		Limits: container.Limits{NanoCPUs: 4_000_000_000, MemoryBytes: 2 << 30}.Clamp(info.NCPU),
	}
	res, err := container.Run(ctx, c, s, container.RunOptions{Timeout: timeout})
	if err != nil {
		t.Fatalf("run %q: %v", argv, err)
	}
	return res
}

func TestBuildTwiceSameIDAndRunsGo(t *testing.T) {
	c := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*buildBudget)
	defer cancel()

	start := time.Now()
	r1, err := image.Build(ctx, c, image.Options{CacheDir: testToolchainCache(t)})
	if err != nil {
		t.Fatalf("first Build: %v", err)
	}
	t.Logf("first build: %v (loaded %v) %s %v", time.Since(start), r1.Loaded, r1.ID, r1.Tags)
	start = time.Now()
	r2, err := image.Build(ctx, c, image.Options{CacheDir: testToolchainCache(t)})
	if err != nil {
		t.Fatalf("second Build: %v", err)
	}
	second := time.Since(start)
	t.Logf("second build: %v (loaded %v)", second, r2.Loaded)
	if r1.ID != r2.ID {
		t.Errorf("image IDs differ: %s, then %s", r1.ID, r2.ID)
	}
	if r2.Loaded {
		t.Error("second Build loaded the image again; want the inspect fast path")
	}
	want := hostGoVersion(t)
	if r1.GoVersion != want {
		t.Errorf("GoVersion = %q; want the host's %q", r1.GoVersion, want)
	}

	im, err := c.ImageInspect(ctx, r1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if im.ID != r1.ID || im.Config.Labels[label.Managed] != label.ManagedValue || im.Config.Labels[label.Kind] != label.KindImage || im.Config.Labels[image.LabelGoVersion] != want {
		t.Errorf("inspect: id %s, labels %v", im.ID, im.Config.Labels)
	}
	for _, tag := range r1.Tags {
		if byTag, err := c.ImageInspect(ctx, tag); err != nil || byTag.ID != r1.ID {
			t.Errorf("tag %s: %v, id %s; want %s", tag, err, byTag.ID, r1.ID)
		}
	}

	// argv only, no shell involved.
	res := run(t, c, r1.ID, quickRun, "go", "version")
	wantOut := "go version " + want + " linux/" + runtime.GOARCH
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != wantOut {
		t.Errorf("go version: exit %d, stdout %q, stderr %q; want %q", res.ExitCode, res.Stdout, res.Stderr, wantOut)
	}

	res = run(t, c, r1.ID, quickRun, "/bin/sh", "-c", `set -e
id -u; id -g
stat -c %a /tmp
echo written > /tmp/probe && cat /tmp/probe
touch /usr/local/go/x 2>/dev/null && echo goroot-writable || echo goroot-read-only
go env GOROOT
test -s /etc/ssl/certs/ca-certificates.crt && echo ca-bundle || echo no-ca-bundle`)
	wantCA := "no-ca-bundle\n"
	if r1.CABundle != "" {
		wantCA = "ca-bundle\n"
	}
	wantLines := "65534\n65534\n1777\nwritten\ngoroot-read-only\n/usr/local/go\n" + wantCA
	if res.ExitCode != 0 || string(res.Stdout) != wantLines {
		t.Errorf("shell probe: exit %d, stdout %q, stderr %q; want %q", res.ExitCode, res.Stdout, res.Stderr, wantLines)
	}
}

// TestToolchainWorksInImage builds, vets and tests a module in the image:
// what the trimming must not break. It compiles part of std, so it takes a
// minute on an idle machine, several on a busy one.
func TestToolchainWorksInImage(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles std in a container; skipped with -short")
	}
	c := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), buildBudget)
	defer cancel()
	r, err := image.Build(ctx, c, image.Options{CacheDir: testToolchainCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := run(t, c, r.ID, compileRun, "/bin/sh", "-c", `set -e
mkdir /tmp/m && cd /tmp/m
printf 'module m\n\ngo 1.21\n' > go.mod
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println(Hello()) }\n\nfunc Hello() string { return "hello" }\n' > main.go
printf 'package main\n\nimport "testing"\n\nfunc TestHello(t *testing.T) {\n\tif Hello() != "hello" {\n\t\tt.Fatal("no")\n\t}\n}\n' > main_test.go
go vet ./...
go test -count=1 ./...
go build -o /tmp/m/bin .
/tmp/m/bin`)
	t.Logf("vet, test, build in the image: %v", time.Since(start))
	if res.TimedOut {
		t.Fatalf("killed after %v; stderr:\n%s", compileRun, res.Stderr)
	}
	if res.ExitCode != 0 || !strings.HasSuffix(string(res.Stdout), "hello\n") || !strings.Contains(string(res.Stdout), "ok  \tm") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

func TestBaseImageRunsShell(t *testing.T) {
	c := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), buildBudget)
	defer cancel()
	r, err := image.Build(ctx, c, image.Options{NoGo: true, CacheDir: testToolchainCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	if r.GoVersion != "" || r.Busybox == "" {
		t.Errorf("base Build = %+v; want busybox, no Go", r)
	}
	res := run(t, c, r.ID, quickRun, "/bin/sh", "-c", `echo ok > /tmp/f && cat /tmp/f && timeout 5 true && tar --help >/dev/null 2>&1; echo $?`)
	if res.ExitCode != 0 || string(res.Stdout) != "ok\n0\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}

	infos, err := image.List(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, in := range infos {
		found = found || in.ID == r.ID
	}
	if !found {
		t.Errorf("List = %+v; want %s among them", infos, r.ID)
	}
}

// proxyRelease is the Go release the module proxy serves on our machines
// besides the host's; tests build its image from the proxy.
const proxyRelease = "1.27.3"

// testToolchainCache is where tests keep what builds fetch: the releases
// FetchGo downloads (the module cache inside is keyed by release), the
// Debian packages.
func testToolchainCache(t *testing.T) string {
	return image.CacheDirForTests(t)
}

// TestBuildFetchedGoTwiceSameID builds the image of a release fetched
// through the module proxy, twice, and runs its go.
func TestBuildFetchedGoTwiceSameID(t *testing.T) {
	c := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*buildBudget)
	defer cancel()
	opts := image.Options{GoVersion: proxyRelease, CacheDir: testToolchainCache(t)}
	start := time.Now()
	r1, err := image.Build(ctx, c, opts)
	if err != nil {
		t.Fatalf("first Build: %v", err)
	}
	t.Logf("first build of go%s (fetch included when not cached): %v (loaded %v) %s", proxyRelease, time.Since(start), r1.Loaded, r1.ID)
	start = time.Now()
	r2, err := image.Build(ctx, c, opts)
	if err != nil {
		t.Fatalf("second Build: %v", err)
	}
	t.Logf("second build: %v (loaded %v)", time.Since(start), r2.Loaded)
	if r1.ID != r2.ID || r2.Loaded {
		t.Errorf("second Build: %s (loaded %v); want %s again, not loaded", r2.ID, r2.Loaded, r1.ID)
	}
	if r1.GoVersion != "go"+proxyRelease || r1.GoRoot != image.FetchedGoRoot(opts.CacheDir, proxyRelease) {
		t.Errorf("Build = go %q from %q; want go%s from the fetched module", r1.GoVersion, r1.GoRoot, proxyRelease)
	}
	res := run(t, c, r1.ID, quickRun, "go", "version")
	want := "go version go" + proxyRelease + " linux/" + runtime.GOARCH
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != want {
		t.Errorf("go version: exit %d, stdout %q, stderr %q; want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
}

// TestCToolchainImage builds the host's Go image with the C toolchain
// twice (the same ID), then builds and tests a cgo program in it with the
// go command's default CGO_ENABLED; libc-bin's getent answers as on a
// developer's machine.
func TestCToolchainImage(t *testing.T) {
	c := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*buildBudget)
	defer cancel()
	opts := image.Options{CToolchain: true, CacheDir: testToolchainCache(t)}
	start := time.Now()
	r1, err := image.Build(ctx, c, opts)
	if err != nil {
		t.Fatalf("first Build: %v", err)
	}
	t.Logf("first build with the C toolchain (downloads included when not cached): %v (loaded %v) %s %v", time.Since(start), r1.Loaded, r1.ID, r1.Tags)
	start = time.Now()
	r2, err := image.Build(ctx, c, opts)
	if err != nil {
		t.Fatalf("second Build: %v", err)
	}
	t.Logf("second build: %v (loaded %v)", time.Since(start), r2.Loaded)
	if r1.ID != r2.ID || r2.Loaded || r1.CToolchain == "" {
		t.Errorf("second Build: %s (loaded %v), C toolchain %q; want %s again, not loaded", r2.ID, r2.Loaded, r1.CToolchain, r1.ID)
	}
	infos, err := image.List(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	labelled := false
	for _, in := range infos {
		labelled = labelled || in.ID == r1.ID && in.CPackages == image.CPackagesDigest(image.CToolchainPackages())
	}
	if !labelled {
		t.Errorf("image %s does not carry %s of the package set", r1.ID, image.LabelCPackages)
	}
	if len(r1.Tags) != 1 || !strings.HasSuffix(r1.Tags[0], "-cgo-local") {
		t.Errorf("tags %v; want stockade/go:<version>-cgo-local", r1.Tags)
	}
	if testing.Short() {
		return
	}
	start = time.Now()
	res := run(t, c, r1.ID, compileRun, "/bin/sh", "-c", `set -e
go env CGO_ENABLED
getent passwd 65534
mkdir /tmp/m && cd /tmp/m
printf 'module m\n\ngo 1.21\n' > go.mod
printf 'package m\n\n// int add(int a, int b) { return a + b; }\nimport "C"\n\nfunc Add(a, b int) int { return int(C.add(C.int(a), C.int(b))) }\n' > add.go
printf 'package m\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal("no")\n\t}\n}\n' > add_test.go
go vet ./...
go test -count=1 ./...`)
	t.Logf("cgo vet and test in the image: %v", time.Since(start))
	if res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "1\nnobody:x:65534:65534:") || !strings.Contains(string(res.Stdout), "ok  \tm") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestDebianBusyboxImage builds the Go toolchain image on a host without
// a static busybox (the look-up pointed at a missing file, so this runs on
// hosts that have one too): the image takes Debian's busybox-static,
// fetched and verified into the cache, and its shell works. A second
// build gives the same ID and does not load again.
func TestDebianBusyboxImage(t *testing.T) {
	c := enginetest.Client(t)
	image.SetHostBusybox(t, filepath.Join(t.TempDir(), "no-busybox"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*buildBudget)
	defer cancel()
	// A tag of its own: the image differs from the default one (another
	// busybox) that other tests run by its default tag. Only the tag is
	// removed at the end; the image goes with it unless it is the same.
	tag := fmt.Sprintf("stockade-test/debian-busybox:%d", time.Now().UnixNano())
	t.Cleanup(func() { c.ImageRemove(context.Background(), tag, false) })
	opts := image.Options{CacheDir: testToolchainCache(t), Tag: tag}
	r1, err := image.Build(ctx, c, opts)
	if err != nil {
		t.Fatalf("first Build: %v", err)
	}
	if !strings.HasPrefix(r1.Busybox, opts.CacheDir+string(filepath.Separator)) || filepath.Base(r1.Busybox) != "busybox" {
		t.Errorf("Busybox = %q; want bin/busybox of the package unpacked under %s", r1.Busybox, opts.CacheDir)
	}
	r2, err := image.Build(ctx, c, opts)
	if err != nil {
		t.Fatalf("second Build: %v", err)
	}
	if r2.ID != r1.ID || r2.Loaded || r2.Busybox != r1.Busybox {
		t.Errorf("second Build = %s (loaded %v, busybox %s); want %s, not loaded, the cached busybox", r2.ID, r2.Loaded, r2.Busybox, r1.ID)
	}
	im, err := c.ImageInspect(ctx, r1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if im.Config.Labels[image.LabelBusybox] == "" {
		t.Errorf("labels %v; want %s", im.Config.Labels, image.LabelBusybox)
	}
	res := run(t, c, r1.ID, quickRun, "busybox", "sh", "-c", "echo ok; ls -d /tmp; go version >/dev/null && echo go")
	if res.ExitCode != 0 || string(res.Stdout) != "ok\n/tmp\ngo\n" {
		t.Errorf("busybox sh: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}
