package dockerapi_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Budgets of the engine tests. The machine may be small and shared with
// other test packages, so they are loose; each only has to be finite.
const (
	callBudget = 30 * time.Second // one removal in t.Cleanup
	runBudget  = 90 * time.Second // a subtest's whole context
)

// fixture is what the engine subtests share: the client and the test image.
type fixture struct {
	c       *dockerapi.Client
	image   string // tag of the test image
	imageID string
}

// TestEngine runs every call of the client against the real engine. The
// subtests share one test image, loaded here and removed when all are done.
func TestEngine(t *testing.T) {
	c := enginetest.Client(t)
	owner := enginetest.Owner(t)
	tag := "stockade-dockerapi-test:" + randomHex(t)
	img := composeImage(t, tag, label.Base(owner, label.KindImage))
	loadImage(t, c, tag, img)
	f := &fixture{c: c, image: tag, imageID: img.ID}

	// Not parallel, so that nothing else in this process allocates while
	// it measures the heap.
	t.Run("BigOutput", f.bigOutput)

	for _, st := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"System", f.system},
		{"Images", f.images},
		{"Pull", f.pull},
		{"Hardened", f.hardened},
		{"Lifecycle", f.lifecycle},
		{"Rename", f.rename},
		{"WaitConditions", f.waitConditions},
		{"OOM", f.oom},
		{"Exec", f.exec},
		{"Archive", f.archive},
		{"Networks", f.networks},
		{"Volumes", f.volumes},
		{"Events", f.events},
	} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			st.f(t)
		})
	}
}

func randomHex(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// testContext returns a context that ends with t or after runBudget.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), runBudget)
	t.Cleanup(cancel)
	return ctx
}

// cleanupContext is the context of a removal in t.Cleanup: fresh, since the
// test's own may be done, and short.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callBudget)
}

func isNotFound(err error) bool { return errors.Is(err, dockerapi.ErrNotFound) }

// labels are label.Base for owner plus extra key=value pairs.
func labels(owner string, extra ...string) map[string]string {
	m := label.Base(owner, label.KindProbe)
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// create creates a container from the test image (unless cfg names one) and
// removes it, with its anonymous volumes, when t ends.
func (f *fixture) create(t *testing.T, ctx context.Context, cfg dockerapi.ContainerConfig) string {
	t.Helper()
	if cfg.Image == "" {
		cfg.Image = f.image
	}
	if cfg.Labels == nil {
		t.Fatal("create: containers must carry labels")
	}
	id, err := f.c.ContainerCreate(ctx, "stockade-test-"+randomHex(t), cfg)
	if err != nil {
		t.Fatalf("ContainerCreate: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := f.c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil && !isNotFound(err) {
			t.Errorf("remove container %s: %v", id, err)
		}
	})
	return id
}

// run starts a created container and waits for it to stop.
func (f *fixture) run(t *testing.T, ctx context.Context, id string) int64 {
	t.Helper()
	if err := f.c.ContainerStart(ctx, id); err != nil {
		t.Fatalf("ContainerStart: %v", err)
	}
	w, err := f.c.ContainerWait(ctx, id, dockerapi.WaitNotRunning)
	if err != nil {
		t.Fatalf("ContainerWait: %v", err)
	}
	return w.StatusCode
}

// locked is the confinement every test container has unless it tests
// something else.
func locked(owner string, cmd ...string) dockerapi.ContainerConfig {
	pids := int64(32)
	return dockerapi.ContainerConfig{
		Cmd:    cmd,
		User:   "65534:65534",
		Labels: labels(owner),
		HostConfig: dockerapi.HostConfig{
			ReadonlyRootfs: true,
			NetworkMode:    "none",
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			Memory:         64 << 20,
			MemorySwap:     64 << 20,
			PidsLimit:      &pids,
		},
	}
}

func (f *fixture) system(t *testing.T) {
	ctx := testContext(t)
	if err := f.c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	v, err := f.c.Version(ctx)
	if err != nil || v.Version == "" || v.APIVersion == "" || v.Os != "linux" {
		t.Fatalf("Version = %+v, %v", v, err)
	}
	// The client talks the engine's version, or its own newest if the
	// engine is newer still.
	want := v.APIVersion
	if apiLess(dockerapi.MaxAPIVersion, want) {
		want = dockerapi.MaxAPIVersion
	}
	if got, err := f.c.APIVersion(ctx); err != nil || got != want {
		t.Errorf("APIVersion = %q, %v; want %q (engine %s)", got, err, want, v.APIVersion)
	}
	info, err := f.c.Info(ctx)
	if err != nil || info.NCPU < 1 || info.MemTotal <= 0 || info.OSType != "linux" || info.ServerVersion != v.Version {
		t.Errorf("Info = %+v, %v", info, err)
	}
	t.Logf("engine %s, API %s (client talks %s), %d CPUs, cgroup %s %s, storage %s", v.Version, v.APIVersion, want, info.NCPU, info.CgroupDriver, info.CgroupVersion, info.Driver)
}

// apiLess compares API versions such as 1.41 and 1.47.
func apiLess(a, b string) bool {
	num := func(s string) (int, int) {
		var x, y int
		maj, min, _ := strings.Cut(s, ".")
		for _, c := range maj {
			x = x*10 + int(c-'0')
		}
		for _, c := range min {
			y = y*10 + int(c-'0')
		}
		return x, y
	}
	a1, a2 := num(a)
	b1, b2 := num(b)
	return a1 < b1 || a1 == b1 && a2 < b2
}

func (f *fixture) images(t *testing.T) {
	ctx := testContext(t)
	c := f.c

	img, err := c.ImageInspect(ctx, f.image)
	if err != nil {
		t.Fatalf("ImageInspect: %v", err)
	}
	if img.ID != f.imageID || !slices.Contains(img.RepoTags, f.image) || img.Os != "linux" || img.Config.Labels[label.Kind] != label.KindImage {
		t.Errorf("ImageInspect = %+v; want ID %s, tag %s, our labels", img, f.imageID, f.image)
	}
	if _, err := c.ImageInspect(ctx, "stockade-test-absent:"+randomHex(t)); !isNotFound(err) {
		t.Errorf("ImageInspect(absent) = %v; want ErrNotFound", err)
	}

	// A second image of this subtest's own, to list and remove.
	owner := enginetest.Owner(t)
	tag := "stockade-dockerapi-test:" + randomHex(t)
	second := composeImage(t, tag, label.Base(owner, label.KindImage))
	loadImage(t, c, tag, second)
	list, err := c.ImageList(ctx, dockerapi.LabelFilter(label.Owner+"="+owner))
	if err != nil || len(list) != 1 || list[0].ID != second.ID || !slices.Contains(list[0].RepoTags, tag) || list[0].Labels[label.Owner] != owner {
		t.Errorf("ImageList(owner) = %+v, %v; want just %s", list, err, second.ID)
	}

	// A second name; removing a name leaves the image while it has another.
	repo, extra := "stockade-dockerapi-test", randomHex(t)
	if err := c.ImageTag(ctx, second.ID, repo, extra); err != nil {
		t.Fatalf("ImageTag: %v", err)
	}
	if img, err := c.ImageInspect(ctx, repo+":"+extra); err != nil || img.ID != second.ID || len(img.RepoTags) != 2 {
		t.Errorf("ImageInspect(new tag) = %+v, %v; want %s with two tags", img, err, second.ID)
	}
	if err := c.ImageRemove(ctx, repo+":"+extra, false); err != nil {
		t.Fatalf("ImageRemove(extra tag): %v", err)
	}
	if img, err := c.ImageInspect(ctx, second.ID); err != nil || !slices.Equal(img.RepoTags, []string{tag}) {
		t.Errorf("ImageInspect after untag = %+v, %v; want only %s", img.RepoTags, err, tag)
	}
	if err := c.ImageTag(ctx, "stockade-test-absent:"+randomHex(t), repo, extra); !isNotFound(err) {
		t.Errorf("ImageTag(absent) = %v; want ErrNotFound", err)
	}

	// An image a container uses cannot be removed without force.
	id := f.create(t, ctx, dockerapi.ContainerConfig{Image: tag, Cmd: []string{"true"}, Labels: labels(owner)})
	err = c.ImageRemove(ctx, tag, false)
	if !errors.Is(err, dockerapi.ErrConflict) {
		t.Errorf("ImageRemove(in use) = %v; want ErrConflict", err)
	}
	if err := c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.ImageRemove(ctx, tag, false); err != nil {
		t.Fatalf("ImageRemove: %v", err)
	}
	if _, err := c.ImageInspect(ctx, second.ID); !isNotFound(err) {
		t.Errorf("ImageInspect(removed) = %v; want ErrNotFound", err)
	}
	if err := c.ImageRemove(ctx, tag, false); !isNotFound(err) {
		t.Errorf("ImageRemove(removed) = %v; want ErrNotFound", err)
	}
	if list, err := c.ImageList(ctx, dockerapi.LabelFilter(label.Owner+"="+owner)); err != nil || len(list) != 0 {
		t.Errorf("ImageList(owner) after remove = %+v, %v; want none", list, err)
	}

	// A load of something that is not an image fails as the engine says.
	_, err = c.ImageLoad(ctx, strings.NewReader("not a tar"))
	var e *dockerapi.Error
	var se *dockerapi.StreamError
	if !errors.As(err, &e) && !errors.As(err, &se) {
		t.Errorf("ImageLoad(garbage) = %v (%T); want *Error or *StreamError", err, err)
	}
}

// pull has no registry to pull from, so it checks the failure: typed, and
// within a bound. The registry is a closed local port so the outcome does
// not depend on DNS or a firewall.
func (f *fixture) pull(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	err := f.c.ImagePull(ctx, "127.0.0.1:1/stockade-test/absent:latest")
	took := time.Since(t0)
	var e *dockerapi.Error
	var se *dockerapi.StreamError
	switch {
	case err == nil:
		t.Fatal("ImagePull succeeded without a registry")
	case ctx.Err() != nil:
		t.Fatalf("ImagePull still running after %v: %v", took, err)
	case errors.As(err, &e):
		t.Logf("ImagePull: %d %v after %v", e.StatusCode, err, took)
		if e.StatusCode < 400 {
			t.Errorf("ImagePull status %d", e.StatusCode)
		}
	case errors.As(err, &se):
		t.Logf("ImagePull: in-stream %v after %v", err, took)
	default:
		t.Errorf("ImagePull = %v (%T); want *Error or *StreamError", err, err)
	}
	if _, err := f.c.ImageInspect(ctx, "127.0.0.1:1/stockade-test/absent:latest"); !isNotFound(err) {
		t.Errorf("ImageInspect after failed pull = %v; want ErrNotFound", err)
	}
}

// hardened creates a container with every host-config field the seeds use
// and checks each took effect, inside and in inspect.
func (f *fixture) hardened(t *testing.T) {
	ctx := testContext(t)
	c := f.c
	owner := enginetest.Owner(t)

	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(host, 0o755); err != nil {
		t.Fatal(err)
	}
	vol := f.volume(t, ctx, owner)

	script := `id -u; id -g
cat /hostro/hello.txt /hostro2/hello.txt
echo tmp > /tmp/f && cat /tmp/f
echo scratch > /scratch/f && cat /scratch/f
touch /rootfile 2>/dev/null && echo root-writable || echo root-readonly
touch /hostro/x 2>/dev/null && echo bind-writable || echo bind-readonly
ls /sys/class/net
while read k v; do case $k in CapEff:|CapBnd:|NoNewPrivs:) echo $k $v;; esac; done < /proc/self/status
case "$(cat /proc/1/cmdline)" in *init*) echo init;; *) echo no-init;; esac
sleep 1 # the engine logs each stream as it reads it: the last line last
echo to-stderr >&2`
	cfg := locked(owner, "sh", "-c", script)
	cfg.Labels = labels(owner, "io.stockade.test", "hardened")
	cfg.HostConfig.Binds = []string{host + ":/hostro:ro"}
	cfg.HostConfig.Mounts = []dockerapi.Mount{
		{Type: "bind", Source: host, Target: "/hostro2", ReadOnly: true},
		{Type: "volume", Source: vol, Target: "/vol"},
		{Type: "tmpfs", Target: "/scratch", TmpfsOptions: &dockerapi.TmpfsOptions{SizeBytes: 1 << 20, Mode: 0o1777}},
	}
	cfg.HostConfig.Tmpfs = map[string]string{"/tmp": "rw,noexec,nosuid,size=8m,mode=1777"}
	cfg.HostConfig.CapAdd = []string{"NET_BIND_SERVICE"}
	cfg.HostConfig.Memory, cfg.HostConfig.MemorySwap = 32<<20, 32<<20
	cfg.HostConfig.NanoCPUs = 5e8
	init := true
	cfg.HostConfig.Init = &init
	id := f.create(t, ctx, cfg)

	if code := f.run(t, ctx, id); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
	stdout, stderr := dockerapi.NewBuffer(1<<20), dockerapi.NewBuffer(1<<20)
	if err := c.ContainerLogs(ctx, id, dockerapi.LogsOptions{Stdout: true, Stderr: true}, stdout, stderr); err != nil {
		t.Fatalf("ContainerLogs: %v", err)
	}
	const want = `65534
65534
hello
hello
tmp
scratch
root-readonly
bind-readonly
lo
CapEff: 0000000000000000
CapBnd: 0000000000000400
NoNewPrivs: 1
init
`
	if stdout.String() != want || stderr.String() != "to-stderr\n" {
		t.Errorf("stdout:\n%s\nstderr:\n%s\nwant stdout:\n%s\nand stderr to-stderr", stdout, stderr, want)
	}
	// Tail counts the lines of both streams.
	tailOut, tailErr := dockerapi.NewBuffer(1<<10), dockerapi.NewBuffer(1<<10)
	if err := c.ContainerLogs(ctx, id, dockerapi.LogsOptions{Stdout: true, Stderr: true, Tail: "2"}, tailOut, tailErr); err != nil ||
		tailOut.String() != "init\n" || tailErr.String() != "to-stderr\n" {
		t.Errorf("ContainerLogs(tail 2) = %q, %q, %v; want init, to-stderr", tailOut, tailErr, err)
	}

	j, err := c.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatalf("ContainerInspect: %v", err)
	}
	hc := j.HostConfig
	if j.State.Status != "exited" || j.State.ExitCode != 0 || j.State.OOMKilled || j.State.Running {
		t.Errorf("State = %+v", j.State)
	}
	if !hc.ReadonlyRootfs || hc.NetworkMode != "none" || hc.Privileged ||
		!slices.Contains(hc.CapDrop, "ALL") || !slices.Contains(hc.CapAdd, "NET_BIND_SERVICE") ||
		!slices.Contains(hc.SecurityOpt, "no-new-privileges") ||
		hc.Memory != 32<<20 || hc.MemorySwap != 32<<20 || hc.NanoCPUs != 5e8 ||
		hc.PidsLimit == nil || *hc.PidsLimit != 32 || hc.Init == nil || !*hc.Init ||
		hc.Tmpfs["/tmp"] != cfg.HostConfig.Tmpfs["/tmp"] || !slices.Equal(hc.Binds, cfg.HostConfig.Binds) || len(hc.Mounts) != 3 {
		t.Errorf("HostConfig = %+v", hc)
	}
	if j.Config.User != "65534:65534" || !maps.Equal(j.Config.Labels, cfg.Labels) || j.Image != f.imageID {
		t.Errorf("Config = %+v, image %s", j.Config, j.Image)
	}
	mounts := map[string]dockerapi.MountPoint{}
	for _, m := range j.Mounts {
		mounts[m.Destination] = m
	}
	if m := mounts["/hostro"]; m.Type != "bind" || m.RW || m.Source != host {
		t.Errorf("mount /hostro = %+v", m)
	}
	if m := mounts["/hostro2"]; m.Type != "bind" || m.RW {
		t.Errorf("mount /hostro2 = %+v", m)
	}
	if m := mounts["/vol"]; m.Type != "volume" || m.Name != vol || !m.RW {
		t.Errorf("mount /vol = %+v", m)
	}

	list, err := c.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelFilter(label.Owner+"="+owner, "io.stockade.test=hardened")})
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].State != "exited" {
		t.Errorf("ContainerList = %+v, %v; want just %s", list, err, id)
	}
	if err := c.ContainerLogs(ctx, "stockade-test-absent-"+randomHex(t), dockerapi.LogsOptions{Stdout: true}, nil, nil); !isNotFound(err) {
		t.Errorf("ContainerLogs(absent) = %v; want ErrNotFound", err)
	}
}

// volume creates a labelled volume removed when t ends.
func (f *fixture) volume(t *testing.T, ctx context.Context, owner string) string {
	t.Helper()
	v, err := f.c.VolumeCreate(ctx, dockerapi.VolumeCreate{Name: "stockade-test-" + randomHex(t), Labels: labels(owner)})
	if err != nil {
		t.Fatalf("VolumeCreate: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := f.c.VolumeRemove(ctx, v.Name, false); err != nil && !isNotFound(err) {
			t.Errorf("remove volume %s: %v", v.Name, err)
		}
	})
	return v.Name
}

// rename: ContainerRename gives a container a free name; a taken name is
// ErrConflict and changes nothing; a missing container is ErrNotFound.
func (f *fixture) rename(t *testing.T) {
	ctx := testContext(t)
	owner := enginetest.Owner(t)
	cfg := locked(owner, "true")
	cfg.Labels = labels(owner)
	a := f.create(t, ctx, cfg)
	b := f.create(t, ctx, cfg)
	jb, err := f.c.ContainerInspect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.ContainerRename(ctx, a, strings.TrimPrefix(jb.Name, "/")); !errors.Is(err, dockerapi.ErrConflict) {
		t.Errorf("ContainerRename to a taken name = %v; want ErrConflict", err)
	}
	want := "stockade-test-renamed-" + randomHex(t)
	if err := f.c.ContainerRename(ctx, a, want); err != nil {
		t.Fatalf("ContainerRename = %v", err)
	}
	if j, err := f.c.ContainerInspect(ctx, want); err != nil || j.ID != a {
		t.Errorf("inspect of the new name = %s, %v; want %s", j.ID, err, a)
	}
	if err := f.c.ContainerRename(ctx, "stockade-test-missing-"+randomHex(t), "stockade-test-x-"+randomHex(t)); !isNotFound(err) {
		t.Errorf("ContainerRename of a missing container = %v; want ErrNotFound", err)
	}
}

func (f *fixture) lifecycle(t *testing.T) {
	ctx := testContext(t)
	c := f.c
	owner := enginetest.Owner(t)
	init := true

	cfg := locked(owner, "sleep", "300")
	cfg.Image = f.image
	cfg.Labels = labels(owner, "io.stockade.test", "sleeper")
	cfg.HostConfig.Init = &init
	name := "stockade-test-" + randomHex(t)
	id, err := c.ContainerCreate(ctx, name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil && !isNotFound(err) {
			t.Error(err)
		}
	})
	if _, err := c.ContainerCreate(ctx, name, cfg); !errors.Is(err, dockerapi.ErrConflict) {
		t.Errorf("ContainerCreate(same name) = %v; want ErrConflict", err)
	}
	other := f.create(t, ctx, locked(owner, "true"))

	if err := c.ContainerStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.ContainerStart(ctx, id); err != nil {
		t.Errorf("ContainerStart(running) = %v; want nil", err)
	}
	ids := func(opts dockerapi.ListOptions) []string {
		t.Helper()
		list, err := c.ContainerList(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list {
			if s.Labels[label.Owner] != owner {
				t.Errorf("ContainerList returned %s of owner %q", s.ID, s.Labels[label.Owner])
			}
			out = append(out, s.ID)
		}
		slices.Sort(out)
		return out
	}
	mine := dockerapi.LabelFilter(label.Owner + "=" + owner)
	if got := ids(dockerapi.ListOptions{Filters: mine}); !slices.Equal(got, []string{id}) {
		t.Errorf("running containers = %q; want %s", got, id)
	}
	all := []string{id, other}
	slices.Sort(all)
	if got := ids(dockerapi.ListOptions{All: true, Filters: mine}); !slices.Equal(got, all) {
		t.Errorf("all containers = %q; want %q", got, all)
	}
	if got := ids(dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(map[string]string{label.Owner: owner, "io.stockade.test": "sleeper"})}); !slices.Equal(got, []string{id}) {
		t.Errorf("sleepers = %q; want %s", got, id)
	}

	if err := c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{}); !errors.Is(err, dockerapi.ErrConflict) {
		t.Errorf("ContainerRemove(running) = %v; want ErrConflict", err)
	}
	// Stop sends SIGTERM, which docker-init passes on to sleep. The kernel
	// drops a signal to a PID 1 that neither handles nor blocks it, and
	// docker-init blocks signals only once it is up (before it forks its
	// child), so wait for the child to be sleep before stopping; otherwise
	// the stop can end in SIGKILL (137) at load.
	initReady(t, ctx, c, id)
	if err := c.ContainerStop(ctx, id, 5*time.Second); err != nil {
		t.Fatalf("ContainerStop: %v", err)
	}
	if w, err := c.ContainerWait(ctx, id, dockerapi.WaitNotRunning); err != nil || w.StatusCode != 143 {
		t.Errorf("ContainerWait after stop = %+v, %v; want 143", w, err)
	}
	if err := c.ContainerStop(ctx, id, time.Second); err != nil {
		t.Errorf("ContainerStop(stopped) = %v; want nil", err)
	}

	if err := c.ContainerStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.ContainerKill(ctx, id, ""); err != nil {
		t.Fatalf("ContainerKill: %v", err)
	}
	if w, err := c.ContainerWait(ctx, id, dockerapi.WaitNotRunning); err != nil || w.StatusCode != 137 {
		t.Errorf("ContainerWait after kill = %+v, %v; want 137", w, err)
	}
	j, err := c.ContainerInspect(ctx, id)
	if err != nil || j.State.Running || j.State.ExitCode != 137 || j.State.OOMKilled || j.Name != "/"+name {
		t.Errorf("ContainerInspect = %+v, %v", j.State, err)
	}
	err = c.ContainerKill(ctx, id, "SIGTERM")
	if !errors.Is(err, dockerapi.ErrNotRunning) || !errors.Is(err, dockerapi.ErrConflict) {
		t.Errorf("ContainerKill(stopped) = %v; want ErrNotRunning and ErrConflict", err)
	}

	if err := c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil {
		t.Fatalf("ContainerRemove: %v", err)
	}
	if _, err := c.ContainerInspect(ctx, id); !isNotFound(err) {
		t.Errorf("ContainerInspect(removed) = %v; want ErrNotFound", err)
	}
	if err := c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true}); !isNotFound(err) {
		t.Errorf("ContainerRemove(removed) = %v; want ErrNotFound", err)
	}
	if err := c.ContainerKill(ctx, id, ""); !isNotFound(err) || errors.Is(err, dockerapi.ErrNotRunning) {
		t.Errorf("ContainerKill(removed) = %v; want ErrNotFound only", err)
	}
	if got := ids(dockerapi.ListOptions{All: true, Filters: mine}); !slices.Equal(got, []string{other}) {
		t.Errorf("containers after remove = %q; want %s", got, other)
	}
}

// waitConditions checks the conditions reach the engine. A wait must be
// registered before the container exits, and nothing tells the caller when
// it is; so each container runs until the test creates a trigger file, some
// time after the wait was sent, and a wait that still missed the exit (it
// then blocks, or finds the container gone) is tried again.
// initReady waits until docker-init's child runs sleep.
func initReady(t *testing.T, ctx context.Context, c *dockerapi.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		eid, err := c.ExecCreate(ctx, id, dockerapi.ExecConfig{Cmd: []string{"sh", "-c", "cat /proc/[0-9]*/comm 2>/dev/null"}, AttachStdout: true})
		if err != nil {
			t.Fatalf("ExecCreate: %v", err)
		}
		out := dockerapi.NewBuffer(4 << 10)
		if err := c.ExecStart(ctx, eid, out, nil); err != nil {
			t.Fatalf("ExecStart: %v", err)
		}
		if slices.Contains(strings.Split(out.String(), "\n"), "sleep") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the init process of %s never started sleep", id)
}

func (f *fixture) waitConditions(t *testing.T) {
	ctx := testContext(t)
	c := f.c
	owner := enginetest.Owner(t)
	trig := t.TempDir()
	if err := os.Chmod(trig, 0o755); err != nil {
		t.Fatal(err)
	}
	trigger := filepath.Join(trig, "go")
	exitOnTrigger := func(code string) dockerapi.ContainerConfig {
		cfg := locked(owner, "sh", "-c", "while [ ! -e /t/go ]; do sleep 0.1; done; exit "+code)
		cfg.HostConfig.Binds = []string{trig + ":/t:ro"}
		return cfg
	}
	// wait starts the container, waits on it with cond, and fires the
	// trigger once the wait is on its way.
	wait := func(id, cond string) (dockerapi.WaitResult, error) {
		t.Helper()
		if err := os.Remove(trigger); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if err := c.ContainerStart(ctx, id); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		type result struct {
			w   dockerapi.WaitResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			w, err := c.ContainerWait(wctx, id, cond)
			done <- result{w, err}
		}()
		time.Sleep(300 * time.Millisecond)
		if err := os.WriteFile(trigger, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := <-done
		return r.w, r.err
	}

	// next-exit waits for the exit of the run under way.
	id := f.create(t, ctx, exitOnTrigger("3"))
	for try := 1; ; try++ {
		w, err := wait(id, dockerapi.WaitNextExit)
		if errors.Is(err, context.DeadlineExceeded) && try < 3 {
			t.Logf("wait(next-exit) missed the exit; again")
			continue
		}
		if err != nil || w.StatusCode != 3 {
			t.Errorf("ContainerWait(next-exit) = %+v, %v; want 3", w, err)
		}
		break
	}
	// not-running answers at once for a stopped container ...
	if w, err := c.ContainerWait(ctx, id, dockerapi.WaitNotRunning); err != nil || w.StatusCode != 3 {
		t.Errorf("ContainerWait(not-running) = %+v, %v; want 3", w, err)
	}
	// ... and next-exit does not.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if w, err := c.ContainerWait(short, id, dockerapi.WaitNextExit); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ContainerWait(next-exit) on a stopped container = %+v, %v; want it to block", w, err)
	}

	// removed, with AutoRemove.
	for try := 1; ; try++ {
		cfg := exitOnTrigger("5")
		cfg.HostConfig.AutoRemove = true
		id := f.create(t, ctx, cfg)
		w, err := wait(id, dockerapi.WaitRemoved)
		if isNotFound(err) && try < 3 {
			t.Logf("wait(removed) came after the removal; again")
			continue
		}
		if err != nil || w.StatusCode != 5 {
			t.Errorf("ContainerWait(removed) = %+v, %v; want 5", w, err)
		}
		if _, err := c.ContainerInspect(ctx, id); !isNotFound(err) {
			t.Errorf("ContainerInspect(auto-removed) = %v; want ErrNotFound", err)
		}
		break
	}
}

// oom runs dd with a 64 MiB buffer under a 16 MiB limit without swap.
func (f *fixture) oom(t *testing.T) {
	ctx := testContext(t)
	owner := enginetest.Owner(t)
	cfg := locked(owner, "dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1")
	cfg.HostConfig.Memory, cfg.HostConfig.MemorySwap = 16<<20, 16<<20
	id := f.create(t, ctx, cfg)
	if code := f.run(t, ctx, id); code != 137 {
		t.Errorf("exit code %d; want 137 (SIGKILL)", code)
	}
	// The engine records OOMKilled when the runtime's OOM event arrives,
	// which can come after the exit (seen once in CI): ask for up to 2s.
	j, err := f.c.ContainerInspect(ctx, id)
	for deadline := time.Now().Add(2 * time.Second); err == nil && !j.State.OOMKilled && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		j, err = f.c.ContainerInspect(ctx, id)
	}
	if err != nil || !j.State.OOMKilled || j.State.ExitCode != 137 || j.State.Status != "exited" {
		t.Errorf("ContainerInspect = %+v, %v; want OOMKilled, exit 137", j.State, err)
	}
}

func (f *fixture) exec(t *testing.T) {
	ctx := testContext(t)
	c := f.c
	owner := enginetest.Owner(t)
	init := true
	cfg := locked(owner, "sleep", "300")
	cfg.HostConfig.Init = &init
	cfg.HostConfig.Tmpfs = map[string]string{"/tmp": "size=1m,mode=1777"}
	id := f.create(t, ctx, cfg)
	if err := c.ContainerStart(ctx, id); err != nil {
		t.Fatal(err)
	}

	eid, err := c.ExecCreate(ctx, id, dockerapi.ExecConfig{
		Cmd:          []string{"sh", "-c", "echo out; echo err >&2; id -u; exit 7"},
		AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		t.Fatalf("ExecCreate: %v", err)
	}
	if in, err := c.ExecInspect(ctx, eid); err != nil || in.Running || in.ExitCode != nil || in.ContainerID != id {
		t.Errorf("ExecInspect(created) = %+v, %v; want not running, no exit code", in, err)
	}
	stdout, stderr := dockerapi.NewBuffer(1<<10), dockerapi.NewBuffer(1<<10)
	if err := c.ExecStart(ctx, eid, stdout, stderr); err != nil {
		t.Fatalf("ExecStart: %v", err)
	}
	if stdout.String() != "out\n65534\n" || stderr.String() != "err\n" {
		t.Errorf("exec stdout %q, stderr %q", stdout, stderr)
	}
	if in, err := c.ExecInspect(ctx, eid); err != nil || in.Running || in.ExitCode == nil || *in.ExitCode != 7 || in.ID != eid {
		t.Errorf("ExecInspect(done) = %+v, %v; want exit code 7", in, err)
	}

	// Env, working directory, user; and a cap that truncates.
	eid, err = c.ExecCreate(ctx, id, dockerapi.ExecConfig{
		Cmd: []string{"sh", "-c", `echo "$FOO"; ls -d "$PWD"; id -u`}, Env: []string{"FOO=bar"}, WorkingDir: "/tmp", User: "1000",
		AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	capped := dockerapi.NewBuffer(4)
	if err := c.ExecStart(ctx, eid, capped, nil); err != nil {
		t.Fatal(err)
	}
	if capped.String() != "bar\n" || capped.Total() != int64(len("bar\n/tmp\n1000\n")) || !capped.Truncated() {
		t.Errorf("capped exec output %q, total %d, truncated %v", capped, capped.Total(), capped.Truncated())
	}

	// Detached: the command runs on without us.
	eid, err = c.ExecCreate(ctx, id, dockerapi.ExecConfig{Cmd: []string{"touch", "/tmp/detached"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ExecStartDetached(ctx, eid); err != nil {
		t.Fatalf("ExecStartDetached: %v", err)
	}
	for {
		in, err := c.ExecInspect(ctx, eid)
		if err != nil {
			t.Fatal(err)
		}
		if !in.Running && in.ExitCode != nil {
			if *in.ExitCode != 0 {
				t.Errorf("detached exec exit code %d", *in.ExitCode)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// /tmp is a tmpfs, which archive calls do not see ...
	if _, err := c.ArchiveStat(ctx, id, "/tmp/detached"); !isNotFound(err) {
		t.Errorf("ArchiveStat(file in a tmpfs) = %v; want ErrNotFound", err)
	}
	// ... so look from inside.
	eid, err = c.ExecCreate(ctx, id, dockerapi.ExecConfig{Cmd: []string{"ls", "/tmp/detached"}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	ls := dockerapi.NewBuffer(1 << 10)
	if err := c.ExecStart(ctx, eid, ls, ls); err != nil || ls.String() != "/tmp/detached\n" {
		t.Errorf("ls /tmp/detached = %q, %v", ls, err)
	}

	if _, err := c.ExecInspect(ctx, "absent"+randomHex(t)); !isNotFound(err) {
		t.Errorf("ExecInspect(absent) = %v; want ErrNotFound", err)
	}
	if err := c.ContainerKill(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ContainerWait(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	_, err = c.ExecCreate(ctx, id, dockerapi.ExecConfig{Cmd: []string{"true"}})
	if !errors.Is(err, dockerapi.ErrNotRunning) || !errors.Is(err, dockerapi.ErrConflict) {
		t.Errorf("ExecCreate(stopped) = %v; want ErrNotRunning", err)
	}
}

// tarOf makes a tar of name → content; names ending in / are directories.
func tarOf(t *testing.T, files ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i+1 < len(files); i += 2 {
		h := &tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), ModTime: epoch, Typeflag: tar.TypeReg}
		if strings.HasSuffix(h.Name, "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, files[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// untar reads a tar (at most max bytes of it) into name → content.
func untar(t *testing.T, r io.Reader, max int64) map[string]string {
	t.Helper()
	tr := tar.NewReader(&dockerapi.CapReader{R: r, N: max})
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		out[h.Name] = string(b)
	}
}

func (f *fixture) archive(t *testing.T) {
	ctx := testContext(t)
	c := f.c
	owner := enginetest.Owner(t)

	// Archives work on containers that never ran. The user is a name:
	// CopyUIDGID looks it up in the container's passwd, and Engine 20.10
	// fails on the numeric "65534:65534".
	cfg := locked(owner, "true")
	cfg.User = "nobody"
	cfg.HostConfig.ReadonlyRootfs = false
	id := f.create(t, ctx, cfg)

	passwd := "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	st, err := c.ArchiveStat(ctx, id, "/etc/passwd")
	if err != nil || st.Name != "passwd" || st.Size != int64(len(passwd)) || !st.Mode.IsRegular() || st.Mode.Perm() != 0o644 {
		t.Errorf("ArchiveStat(/etc/passwd) = %+v, %v", st, err)
	}
	if st, err := c.ArchiveStat(ctx, id, "/bin/sh"); err != nil || st.Mode&os.ModeSymlink == 0 {
		t.Errorf("ArchiveStat(/bin/sh) = %+v, %v; want a symlink", st, err)
	}
	if st, err := c.ArchiveStat(ctx, id, "/tmp"); err != nil || !st.Mode.IsDir() || st.Mode&os.ModeSticky == 0 || st.Mode.Perm() != 0o777 {
		t.Errorf("ArchiveStat(/tmp) = %+v (%v), %v; want a sticky 1777 directory", st, st.Mode, err)
	}
	if _, err := c.ArchiveStat(ctx, id, "/absent"); !isNotFound(err) {
		t.Errorf("ArchiveStat(/absent) = %v; want ErrNotFound", err)
	}
	if _, err := c.ArchiveStat(ctx, "stockade-test-absent-"+randomHex(t), "/"); !isNotFound(err) {
		t.Errorf("ArchiveStat(absent container) = %v; want ErrNotFound", err)
	}

	rc, st, err := c.ArchiveGet(ctx, id, "/etc")
	if err != nil {
		t.Fatalf("ArchiveGet: %v", err)
	}
	got := untar(t, rc, 1<<20)
	rc.Close()
	if !st.Mode.IsDir() || got["etc/passwd"] != passwd || got["etc/group"] == "" {
		t.Errorf("ArchiveGet(/etc) = %+v, files %q", st, slices.Sorted(maps.Keys(got)))
	}
	// A cap smaller than the archive stops the read.
	rc, _, err = c.ArchiveGet(ctx, id, "/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, &dockerapi.CapReader{R: rc, N: 64 << 10})
	rc.Close()
	if !errors.Is(err, dockerapi.ErrCapExceeded) {
		t.Errorf("capped ArchiveGet(/bin/busybox) = %v; want ErrCapExceeded", err)
	}

	in := tarOf(t, "hello.txt", "put\n", "sub/", "", "sub/x", "deep\n")
	if err := c.ArchivePut(ctx, id, "/tmp", bytes.NewReader(in), dockerapi.PutOptions{}); err != nil {
		t.Fatalf("ArchivePut: %v", err)
	}
	rc, _, err = c.ArchiveGet(ctx, id, "/tmp/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	got = untar(t, rc, 1<<20)
	rc.Close()
	if !maps.Equal(got, map[string]string{"hello.txt": "put\n"}) {
		t.Errorf("ArchiveGet(/tmp/hello.txt) = %q", got)
	}
	if st, err := c.ArchiveStat(ctx, id, "/tmp/sub/x"); err != nil || st.Size != 5 {
		t.Errorf("ArchiveStat(/tmp/sub/x) = %+v, %v", st, err)
	}
	// Files keep the tar's owner (root here), or take the container's user
	// with CopyUIDGID.
	if err := c.ArchivePut(ctx, id, "/tmp", bytes.NewReader(tarOf(t, "mine", "x")), dockerapi.PutOptions{CopyUIDGID: true}); err != nil {
		t.Fatalf("ArchivePut(CopyUIDGID): %v", err)
	}
	for file, uid := range map[string]int{"/tmp/hello.txt": 0, "/tmp/mine": 65534} {
		rc, _, err := c.ArchiveGet(ctx, id, file)
		if err != nil {
			t.Fatal(err)
		}
		h, err := tar.NewReader(rc).Next()
		rc.Close()
		if err != nil || h.Uid != uid {
			t.Errorf("owner of %s = %+v, %v; want uid %d", file, h, err, uid)
		}
	}
	// A file may not replace a directory when asked not to.
	err = c.ArchivePut(ctx, id, "/tmp", bytes.NewReader(tarOf(t, "sub", "file\n")), dockerapi.PutOptions{NoOverwriteDirNonDir: true})
	if e := (*dockerapi.Error)(nil); !errors.As(err, &e) {
		t.Errorf("ArchivePut(file over dir) = %v; want *Error", err)
	}
	if err := c.ArchivePut(ctx, id, "/absent", bytes.NewReader(in), dockerapi.PutOptions{}); !isNotFound(err) {
		t.Errorf("ArchivePut(/absent) = %v; want ErrNotFound", err)
	}

	// A read-only root refuses extraction.
	ro := f.create(t, ctx, locked(owner, "true"))
	err = c.ArchivePut(ctx, ro, "/tmp", bytes.NewReader(in), dockerapi.PutOptions{})
	var e *dockerapi.Error
	if !errors.As(err, &e) || e.StatusCode < 400 {
		t.Errorf("ArchivePut(read-only root) = %v; want *Error", err)
	} else {
		t.Logf("ArchivePut(read-only root): %v", err)
	}
}

func (f *fixture) networks(t *testing.T) {
	ctx := testContext(t)
	c := f.c
	owner := enginetest.Owner(t)

	create := func(name string) string {
		t.Helper()
		id, err := c.NetworkCreate(ctx, dockerapi.NetworkCreate{Name: name, Internal: true, Labels: labels(owner), CheckDuplicate: true})
		if err != nil {
			t.Fatalf("NetworkCreate: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := cleanupContext()
			defer cancel()
			if err := c.NetworkRemove(ctx, id); err != nil && !isNotFound(err) {
				t.Errorf("remove network %s: %v", name, err)
			}
		})
		return id
	}
	n1, n2 := "stockade-test-"+randomHex(t), "stockade-test-"+randomHex(t)
	id1, id2 := create(n1), create(n2)
	if _, err := c.NetworkCreate(ctx, dockerapi.NetworkCreate{Name: n1, Labels: labels(owner), CheckDuplicate: true}); !errors.Is(err, dockerapi.ErrConflict) {
		t.Errorf("NetworkCreate(same name) = %v; want ErrConflict", err)
	}
	list, err := c.NetworkList(ctx, dockerapi.LabelFilter(label.Owner+"="+owner))
	var names []string
	for _, n := range list {
		if !n.Internal || n.Labels[label.Owner] != owner || n.Driver != "bridge" {
			t.Errorf("network %+v", n)
		}
		names = append(names, n.Name)
	}
	slices.Sort(names)
	want := []string{n1, n2}
	slices.Sort(want)
	if err != nil || !slices.Equal(names, want) {
		t.Errorf("NetworkList(owner) = %q, %v; want %q", names, err, want)
	}

	cfg := locked(owner, "true")
	cfg.HostConfig.NetworkMode = n1
	id := f.create(t, ctx, cfg)
	networks := func() []string {
		t.Helper()
		j, err := c.ContainerInspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(maps.Keys(j.NetworkSettings.Networks))
	}
	if err := c.NetworkConnect(ctx, id2, id, "alias1"); err != nil {
		t.Fatalf("NetworkConnect: %v", err)
	}
	if got := networks(); !slices.Equal(got, want) {
		t.Errorf("networks after connect = %q; want %q", got, want)
	}
	if err := c.NetworkDisconnect(ctx, n2, id, false); err != nil {
		t.Fatalf("NetworkDisconnect: %v", err)
	}
	if got := networks(); !slices.Equal(got, []string{n1}) {
		t.Errorf("networks after disconnect = %q; want %s", got, n1)
	}
	// (Engine 20.10 connects a created container to a network that does
	// not exist, so only a missing container is checked.)
	if err := c.NetworkConnect(ctx, n2, "stockade-test-absent-"+randomHex(t)); !isNotFound(err) {
		t.Errorf("NetworkConnect(absent container) = %v; want ErrNotFound", err)
	}

	if err := c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{id1, n2} { // by ID and by name
		if err := c.NetworkRemove(ctx, n); err != nil {
			t.Errorf("NetworkRemove(%s): %v", n, err)
		}
	}
	if err := c.NetworkRemove(ctx, id1); !isNotFound(err) {
		t.Errorf("NetworkRemove(removed) = %v; want ErrNotFound", err)
	}
	if list, err := c.NetworkList(ctx, dockerapi.LabelFilter(label.Owner+"="+owner)); err != nil || len(list) != 0 {
		t.Errorf("NetworkList(owner) after remove = %+v, %v; want none", list, err)
	}
}

func (f *fixture) volumes(t *testing.T) {
	ctx := testContext(t)
	c := f.c
	owner := enginetest.Owner(t)

	name := f.volume(t, ctx, owner)
	again, err := c.VolumeCreate(ctx, dockerapi.VolumeCreate{Name: name, Labels: labels(owner)})
	if err != nil || again.Name != name || again.Driver != "local" || again.Labels[label.Owner] != owner {
		t.Errorf("VolumeCreate(existing) = %+v, %v; want the volume", again, err)
	}
	list, err := c.VolumeList(ctx, dockerapi.LabelFilter(label.Owner+"="+owner))
	if err != nil || len(list) != 1 || list[0].Name != name || list[0].Mountpoint == "" {
		t.Errorf("VolumeList(owner) = %+v, %v; want just %s", list, err, name)
	}

	// In use by a container, even a stopped one, it stays.
	cfg := locked(owner, "true")
	cfg.HostConfig.Mounts = []dockerapi.Mount{{Type: "volume", Source: name, Target: "/data"}}
	cfg.Volumes = map[string]struct{}{"/anon": {}} // an anonymous volume too
	id := f.create(t, ctx, cfg)
	if err := c.VolumeRemove(ctx, name, false); !errors.Is(err, dockerapi.ErrConflict) {
		t.Errorf("VolumeRemove(in use) = %v; want ErrConflict", err)
	}
	j, err := c.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var anon string
	for _, m := range j.Mounts {
		if m.Destination == "/anon" {
			anon = m.Name
		}
	}
	if anon == "" {
		t.Fatalf("no anonymous volume in %+v", j.Mounts)
	}
	// Removing the container with Volumes takes its anonymous volume, not
	// the named one.
	if err := c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Volumes: true}); err != nil {
		t.Fatal(err)
	}
	if list, err := c.VolumeList(ctx, dockerapi.Filters{"name": {anon}}); err != nil || len(list) != 0 {
		t.Errorf("anonymous volume after ContainerRemove(Volumes) = %+v, %v; want gone", list, err)
	}
	if err := c.VolumeRemove(ctx, name, false); err != nil {
		t.Fatalf("VolumeRemove: %v", err)
	}
	if err := c.VolumeRemove(ctx, name, false); !isNotFound(err) {
		t.Errorf("VolumeRemove(removed) = %v; want ErrNotFound", err)
	}
	if list, err := c.VolumeList(ctx, dockerapi.LabelFilter(label.Owner+"="+owner)); err != nil || len(list) != 0 {
		t.Errorf("VolumeList(owner) after remove = %+v, %v; want none", list, err)
	}
}

func (f *fixture) events(t *testing.T) {
	ctx := testContext(t)
	c := f.c
	owner := enginetest.Owner(t)
	since := time.Now()
	filters := dockerapi.Filters{"type": {"container"}, "label": {label.Owner + "=" + owner}}

	s, err := c.Events(ctx, dockerapi.EventOptions{Filters: filters})
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	defer s.Close()
	id := f.create(t, ctx, locked(owner, "true"))
	if err := c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for !slices.Contains(actions, "destroy") {
		e, err := s.Next()
		if err != nil {
			t.Fatalf("Next after %q: %v", actions, err)
		}
		if e.Type != "container" || e.Actor.ID != id || e.Actor.Attributes[label.Owner] != owner || e.TimeNano == 0 {
			t.Errorf("event %+v; want only this test's container", e)
		}
		actions = append(actions, e.Action)
	}
	if !slices.Equal(actions, []string{"create", "destroy"}) {
		t.Errorf("actions = %q; want create, destroy", actions)
	}
	s.Close()
	if _, err := s.Next(); err == nil {
		t.Error("Next after Close succeeded")
	}

	// A bounded window replays the same events and ends.
	bounded, err := c.Events(ctx, dockerapi.EventOptions{Since: since.Add(-time.Second), Until: time.Now().Add(time.Second), Filters: filters})
	if err != nil {
		t.Fatal(err)
	}
	defer bounded.Close()
	var replay []string
	for {
		e, err := bounded.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("bounded Next: %v", err)
		}
		replay = append(replay, e.Action)
	}
	if !slices.Equal(replay, actions) {
		t.Errorf("bounded events = %q; want %q", replay, actions)
	}
}
