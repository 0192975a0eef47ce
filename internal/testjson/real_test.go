package testjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/hosttest"
	"github.com/stockade/stockade/internal/modproxy"
)

var (
	update = flag.Bool("update", false, "rewrite golden reports (want.json, *.golden) from the stored inputs")
	rerun  = flag.Bool("rerun", false, "rerun the host toolchain on the fixture repositories to refresh the stored inputs in testdata/real (implies -update)")
)

// realCase is one toolchain command run against one fixture repository.
// Its captured output is kept in testdata/real/<name>/ (stdout, stderr,
// meta.json) and the parsed report in want.json.
type realCase struct {
	repo string
	cmd  string        // "test", "vet" or "build"
	args []string      // after "go"
	kill time.Duration // our own deadline, 0 for the default
	cap  int           // stdout cap in bytes, 0 for the default
}

// realCap is the default capture cap per stream, in bytes.
const realCap = 1 << 20

func (c realCase) name() string {
	n := c.repo + "-" + c.cmd
	if c.kill > 0 {
		n += "-killed"
	}
	return n
}

var realCases = func() []realCase {
	var cs []realCase
	for _, repo := range []string{"clean", "failing-test", "build-error", "vet-finding", "test-build-error", "old-go"} {
		cs = append(cs,
			realCase{repo: repo, cmd: "test", args: []string{"test", "-json", "-count=1", "./..."}},
			realCase{repo: repo, cmd: "vet", args: []string{"vet", "./..."}},
			realCase{repo: repo, cmd: "build", args: []string{"build", "./..."}},
		)
	}
	return append(cs,
		// go test's own -timeout names the hung test.
		realCase{repo: "hang", cmd: "test", args: []string{"test", "-json", "-count=1", "-timeout=3s", "./..."}},
		// Our deadline kills go test first: the package never ends.
		realCase{repo: "hang", cmd: "test", args: []string{"test", "-json", "-count=1", "./..."}, kill: 8 * time.Second},
		// 100 MiB of output against a 64 KiB cap.
		realCase{repo: "big-output", cmd: "test", args: []string{"test", "-json", "-count=1", "./..."}, cap: 64 << 10},
		// The module's go directive is newer than the toolchain.
		realCase{repo: "newer-go", cmd: "test", args: []string{"test", "-json", "-count=1", "./..."}},
		realCase{repo: "newer-go", cmd: "build", args: []string{"build", "./..."}},
	)
}()

type meta struct {
	Args       []string `json:"args"`
	ExitCode   int      `json:"exit_code"`
	TimedOut   bool     `json:"timed_out"`
	Truncated  bool     `json:"truncated"`
	ModulePath string   `json:"module_path"`
	ModuleDir  string   `json:"module_dir"`
	Packages   []string `json:"packages"`
	GoVersion  string   `json:"go_version"`
}

func parse(cmd string, in Input) *Report {
	switch cmd {
	case "test":
		return ParseTest(in)
	case "vet":
		return ParseVet(in)
	}
	return ParseBuild(in)
}

// TestReal_Golden parses the stored real outputs and compares the reports
// with want.json. With -rerun it first reruns the toolchain to refresh the
// stored outputs.
func TestReal_Golden(t *testing.T) {
	if *rerun {
		*update = true
		h := newHost(t)
		for _, c := range realCases {
			in, m := h.run(t, c)
			dir := filepath.Join("testdata", "real", c.name())
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			mj, _ := json.MarshalIndent(m, "", "\t")
			for name, data := range map[string][]byte{"stdout": in.Stdout, "stderr": in.Stderr, "meta.json": append(mj, '\n')} {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, c := range realCases {
		t.Run(c.name(), func(t *testing.T) {
			dir := filepath.Join("testdata", "real", c.name())
			in := loadInput(t, dir)
			got, err := json.MarshalIndent(parse(c.cmd, in), "", "\t")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join(dir, "want.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("report differs from %s (rerun with -update if intended):\n%s", golden, got)
			}
		})
	}
}

// TestReal_Expectations states, per stored real output, the verdict and
// findings the fixture exists to produce, so a -update cannot quietly
// accept a regression.
func TestReal_Expectations(t *testing.T) {
	type fk struct {
		kind       Kind
		pkg, test  string
		file, text string // text: substring of Message
	}
	const m = "stockade.test/repo/"
	tests := []struct {
		name    string
		status  Status
		reasons []string // substrings, one per reason
		want    []fk     // exactly these findings, in report order
	}{
		{name: "clean-test", status: Pass},
		{name: "clean-vet", status: Pass},
		{name: "clean-build", status: Pass},
		{name: "failing-test-test", status: Fail, want: []fk{
			{KindTest, m + "failing-test", "TestAdd", "calc_test.go", "Add(2, 2) = 0; want 4"},
			{KindTest, m + "failing-test", "TestTable/#01", "calc_test.go", "Add(1, 1) = 0; want 2"},
		}},
		{name: "failing-test-vet", status: Pass},
		{name: "failing-test-build", status: Pass},
		{name: "build-error-test", status: Fail, want: []fk{
			{KindBuild, m + "build-error", "", "broken.go", "undefined: greet.Goodbye"},
			{KindBuild, m + "build-error", "", "broken.go", `cannot use "three"`},
		}},
		{name: "build-error-build", status: Fail, want: []fk{
			{KindBuild, m + "build-error", "", "broken.go", "undefined: greet.Goodbye"},
			{KindBuild, m + "build-error", "", "broken.go", `cannot use "three"`},
		}},
		{name: "build-error-vet", status: Fail, want: []fk{
			{KindBuild, m + "build-error", "", "broken.go", "undefined: greet.Goodbye"},
		}},
		{name: "vet-finding-vet", status: Fail, want: []fk{
			{KindVet, m + "vet-finding", "", "vet.go", "self-assignment of name"},
		}},
		{name: "vet-finding-test", status: Pass},
		{name: "vet-finding-build", status: Pass},
		{name: "test-build-error-build", status: Pass},
		{name: "test-build-error-test", status: Fail, want: []fk{
			{KindBuild, m + "test-build-error", "", "lib_test.go", "cannot use Name()"},
		}},
		{name: "test-build-error-vet", status: Fail, want: []fk{
			{KindBuild, m + "test-build-error", "", "lib_test.go", "cannot use Name()"},
		}},
		{name: "old-go-test", status: Pass},
		{name: "old-go-vet", status: Pass},
		{name: "old-go-build", status: Pass},
		{name: "hang-test", status: Fail, want: []fk{
			{KindTestTimeout, m + "hang", "TestForever", "hang_test.go", "test timed out"},
		}},
		{name: "hang-test-killed", status: Inconclusive, reasons: []string{"timed out", "no final event for package " + m + "hang"}},
		{name: "big-output-test", status: Inconclusive, reasons: []string{"output truncated", "no final event"}},
		{name: "newer-go-test", status: Inconclusive, reasons: []string{"the go command failed", "no packages"}, want: []fk{
			{KindToolchain, "", "", "", "go.mod requires go >= 1.99"},
		}},
		{name: "newer-go-build", status: Inconclusive, reasons: []string{"the go command failed"}, want: []fk{
			{KindToolchain, "", "", "", "go.mod requires go >= 1.99"},
		}},
	}
	names := make(map[string]bool)
	for _, c := range realCases {
		names[c.name()] = true
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !names[tt.name] {
				t.Fatalf("no real case %s", tt.name)
			}
			delete(names, tt.name)
			cmd := "test"
			for _, c := range []string{"vet", "build"} {
				if strings.HasSuffix(tt.name, "-"+c) {
					cmd = c
				}
			}
			r := parse(cmd, loadInput(t, filepath.Join("testdata", "real", tt.name)))
			if r.Status != tt.status {
				t.Errorf("Status = %s; want %s (reasons %q)", r.Status, tt.status, r.Reasons)
			}
			if len(r.Reasons) != len(tt.reasons) {
				t.Errorf("Reasons = %q; want %d matching %q", r.Reasons, len(tt.reasons), tt.reasons)
			} else {
				for i, want := range tt.reasons {
					if !strings.Contains(r.Reasons[i], want) {
						t.Errorf("Reasons[%d] = %q; want it to contain %q", i, r.Reasons[i], want)
					}
				}
			}
			if len(r.Findings) != len(tt.want) {
				t.Fatalf("Findings = %+v; want %d", r.Findings, len(tt.want))
			}
			for i, w := range tt.want {
				f := r.Findings[i]
				if f.Kind != w.kind || f.Package != w.pkg || f.Test != w.test || f.File != w.file || !strings.Contains(f.Message, w.text) {
					t.Errorf("Findings[%d] = {%s %s %s %s %q}; want {%s %s %s %s ~%q}", i, f.Kind, f.Package, f.Test, f.File, f.Message, w.kind, w.pkg, w.test, w.file, w.text)
				}
			}
		})
	}
	for n := range names {
		t.Errorf("real case %s has no expectation", n)
	}
}

// TestReal_KeysStableAcrossRuns reruns the toolchain on fresh copies of the
// fixtures (new directories, new timings) and requires the same verdicts
// and finding keys as the stored runs.
func TestReal_KeysStableAcrossRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	h := newHost(t)
	for _, c := range realCases {
		if c.kill > 0 || c.repo == "big-output" {
			continue // slow, and their verdicts rest on reasons, not keys
		}
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			in, _ := h.run(t, c)
			got := parse(c.cmd, in)
			want := parse(c.cmd, loadInput(t, filepath.Join("testdata", "real", c.name())))
			if got.Status != want.Status {
				t.Errorf("Status = %s; stored run gave %s (reasons %q)", got.Status, want.Status, got.Reasons)
			}
			if g, w := keys(got), keys(want); !slices.Equal(g, w) {
				t.Errorf("keys = %v; stored run gave %v\nfindings: %+v", g, w, got.Findings)
			}
		})
	}
}

func keys(r *Report) []string {
	var ks []string
	for _, f := range r.Findings {
		ks = append(ks, f.Key)
	}
	slices.Sort(ks)
	return ks
}

func loadInput(t *testing.T, dir string) Input {
	t.Helper()
	var m meta
	data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	stdout, err := os.ReadFile(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.ReadFile(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	return Input{Stdout: stdout, Stderr: stderr, ExitCode: m.ExitCode, TimedOut: m.TimedOut, Truncated: m.Truncated,
		ModulePath: m.ModulePath, ModuleDir: m.ModuleDir, Packages: m.Packages}
}

// host runs the host's go command against the fixture proxy, with an
// environment built from scratch.
type host struct {
	goBin string
	proxy string
	env   []string
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if proxyDir != "" {
		os.RemoveAll(proxyDir)
	}
	os.Exit(code)
}

var (
	proxyOnce sync.Once
	proxyDir  string
	proxyErr  error
)

func newHost(t *testing.T) *host {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	proxyOnce.Do(func() {
		proxyDir, proxyErr = os.MkdirTemp("", "stockade-testjson-proxy-")
		if proxyErr == nil {
			proxyErr = modproxy.Generate(filepath.Join("..", "..", "testdata", "modules"), proxyDir)
		}
	})
	if proxyErr != nil {
		t.Fatal(proxyErr)
	}
	home := hosttest.QuietHome(t)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = t.TempDir()
	}
	return &host{goBin: goBin, proxy: proxyDir, env: []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"GOENV=off",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOFLAGS=-mod=mod -modcacherw",
		"GOPROXY=file://" + filepath.ToSlash(proxyDir),
		"GOSUMDB=off",
		"GOPRIVATE=",
		"GOMODCACHE=" + filepath.Join(home, "modcache"),
		"GOCACHE=" + filepath.Join(cache, "go-build"),
		"CGO_ENABLED=0",
	}}
}

// run copies the fixture to a fresh directory and runs c there.
func (h *host) run(t *testing.T, c realCase) (Input, meta) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), c.repo)
	copyTree(t, filepath.Join("..", "..", "testdata", "repos", c.repo), dir)
	m := meta{Args: c.args, ModulePath: "stockade.test/repo/" + c.repo, ModuleDir: dir}

	list, _, code, _, _ := h.exec(dir, []string{"list", "./..."}, 0, realCap)
	if code == 0 {
		m.Packages = lines(list)
	}
	v, _, _, _, _ := h.exec(dir, []string{"env", "GOVERSION"}, 0, realCap)
	m.GoVersion = strings.TrimSpace(string(v))

	limit := c.cap
	if limit == 0 {
		limit = realCap
	}
	stdout, stderr, code, timedOut, truncated := h.exec(dir, c.args, c.kill, limit)
	m.ExitCode, m.TimedOut, m.Truncated = code, timedOut, truncated
	return Input{Stdout: stdout, Stderr: stderr, ExitCode: code, TimedOut: timedOut, Truncated: truncated,
		ModulePath: m.ModulePath, ModuleDir: dir, Packages: m.Packages}, m
}

// exec runs go with args in dir, keeping at most limit bytes of each
// stream. A kill deadline stops the whole process group (go and the test
// binaries it started) and reports timedOut.
func (h *host) exec(dir string, args []string, kill time.Duration, limit int) (stdout, stderr []byte, code int, timedOut, truncated bool) {
	if kill == 0 {
		kill = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), kill)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.goBin, args...)
	cmd.Dir = dir
	cmd.Env = h.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var o, e capped
	o.limit, e.limit = limit, limit
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		code = -1
	}
	// A killed go command may leave its test binary in the group.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return o.buf.Bytes(), e.buf.Bytes(), code, ctx.Err() != nil, o.cut || e.cut
}

// capped keeps the first limit bytes written to it and discards the rest.
type capped struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
	cut   bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.limit - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		c.cut = true
	} else {
		c.buf.Write(p)
	}
	return len(p), nil
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
