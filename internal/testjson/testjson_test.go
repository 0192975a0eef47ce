package testjson

import (
	"strconv"
	"strings"
	"testing"
)

const (
	mod = "ex.test/m"
	dir = "/src/m"
)

// ev builds one test2json line; test may be "".
func ev(action, pkg, test, output string) string {
	s := `{"Action":"` + action + `","Package":"` + pkg + `"`
	if test != "" {
		s += `,"Test":"` + test + `"`
	}
	if action == "output" {
		s += `,"Output":` + quoteJSON(output)
	}
	return s + "}\n"
}

func quoteJSON(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

func passing(pkg string) string {
	return ev("start", pkg, "", "") +
		ev("run", pkg, "TestA", "") +
		ev("output", pkg, "TestA", "=== RUN   TestA\n") +
		ev("pass", pkg, "TestA", "") +
		ev("pass", pkg, "", "")
}

type wantFinding struct {
	kind            Kind
	pkg, test, file string
	message         string // exact
	line            int
}

func TestParseTest(t *testing.T) {
	tests := []struct {
		name     string
		in       Input
		status   Status
		reasons  []string // substrings, in order
		findings []wantFinding
	}{
		{
			name: "zero input", in: Input{},
			status: Inconclusive, reasons: []string{"no packages were tested"},
		},
		{
			name:   "pass",
			in:     Input{Stdout: []byte(passing(mod)), Packages: []string{mod}},
			status: Pass,
		},
		{
			name: "no test files is a final event",
			in: Input{Stdout: []byte(passing(mod) + ev("start", mod+"/cmd", "", "") +
				ev("output", mod+"/cmd", "", "?   \tex.test/m/cmd\t[no test files]\n") + ev("skip", mod+"/cmd", "", "")),
				Packages: []string{mod, mod + "/cmd"}},
			status: Pass,
		},
		{
			name:   "non-JSON line",
			in:     Input{Stdout: []byte(passing(mod) + "hello from a test\n" + "again\n")},
			status: Inconclusive, reasons: []string{`not a test event: "hello from a test"`, "1 more lines"},
		},
		{
			name:   "JSON that is not an event",
			in:     Input{Stdout: []byte(passing(mod) + `{"hello":1}` + "\n")},
			status: Inconclusive, reasons: []string{"not a test event"},
		},
		{
			name:   "listed package without final event",
			in:     Input{Stdout: []byte(passing(mod) + ev("start", mod+"/b", "", "")), Packages: []string{mod, mod + "/b", mod + "/c"}},
			status: Inconclusive, reasons: []string{"no final event for package ex.test/m/b", "no final event for package ex.test/m/c"},
		},
		{
			name: "exit 0 despite failures",
			in: Input{ModulePath: mod, Stdout: []byte(ev("run", mod, "TestA", "") + ev("output", mod, "TestA", "    a_test.go:9: boom\n") +
				ev("fail", mod, "TestA", "") + ev("fail", mod, "", ""))},
			status: Inconclusive, reasons: []string{"exit status 0 despite failures"},
			findings: []wantFinding{{KindTest, mod, "TestA", "a_test.go", "boom", 9}},
		},
		{
			name:   "non-zero exit nothing explains",
			in:     Input{Stdout: []byte(passing(mod)), ExitCode: 2, Stderr: []byte("signal: killed\n")},
			status: Inconclusive, reasons: []string{"exit status 2 that no finding explains"},
		},
		{
			name:   "truncated",
			in:     Input{Stdout: []byte(passing(mod) + `{"Action":"out`), Truncated: true},
			status: Inconclusive, reasons: []string{"output truncated"},
		},
		{
			name:   "timed out",
			in:     Input{Stdout: []byte(ev("start", mod, "", "") + ev("run", mod, "TestA", "")), TimedOut: true, ExitCode: -1},
			status: Inconclusive, reasons: []string{"timed out", "no final event for package ex.test/m"},
		},
		{
			name: "failing test and subtests",
			in: Input{ExitCode: 1, ModulePath: mod, Stdout: []byte(
				ev("run", mod+"/sub", "TestT", "") +
					ev("run", mod+"/sub", "TestT/a", "") +
					ev("output", mod+"/sub", "TestT/a", "    t_test.go:12: got 1 after 1.5s; want 2\n") +
					ev("output", mod+"/sub", "TestT/a", "    t_test.go:13: second line\n") +
					ev("fail", mod+"/sub", "TestT/a", "") +
					ev("output", mod+"/sub", "TestT", "--- FAIL: TestT (0.00s)\n") +
					ev("fail", mod+"/sub", "TestT", "") +
					ev("fail", mod+"/sub", "", ""))},
			status:   Fail,
			findings: []wantFinding{{KindTest, mod + "/sub", "TestT/a", "sub/t_test.go", "got 1 after <dur>; want 2", 12}},
		},
		{
			name: "panic in a test",
			in: Input{ExitCode: 1, ModulePath: mod, ModuleDir: dir, Stdout: []byte(
				ev("run", mod, "TestP", "") +
					ev("output", mod, "TestP", "--- FAIL: TestP (0.00s)\n") +
					ev("output", mod, "TestP", "panic: assignment to entry in nil map [recovered, repanicked]\n") +
					ev("output", mod, "TestP", "goroutine 18 [running]:\n") +
					ev("output", mod, "TestP", "testing.tRunner.func1.2({0x55cc40, 0x6cdcb0})\n") +
					ev("output", mod, "TestP", "\t/usr/local/go/src/testing/testing.go:1974 +0x232\n") +
					ev("output", mod, "TestP", "ex.test/m.TestP(0x84717dd2248?)\n") +
					ev("output", mod, "TestP", "\t/src/m/x_test.go:3 +0x28\n") +
					ev("fail", mod, "TestP", "") + ev("fail", mod, "", ""))},
			status:   Fail,
			findings: []wantFinding{{KindTest, mod, "TestP", "x_test.go", "panic: assignment to entry in nil map", 3}},
		},
		{
			name: "timeout panic attributed to the package (before Go 1.24)",
			in: Input{ExitCode: 1, ModulePath: mod, ModuleDir: dir, Stdout: []byte(
				ev("run", mod, "TestHang", "") +
					ev("output", mod, "TestHang", "=== RUN   TestHang\n") +
					ev("output", mod, "", "panic: test timed out after 10m0s\n") +
					ev("output", mod, "", "running tests:\n\tTestHang (10m0s)\n") +
					ev("output", mod, "", "\t/src/m/h_test.go:20 +0x49\n") +
					ev("output", mod, "", "FAIL\tex.test/m\t600.01s\n") +
					ev("fail", mod, "", ""))},
			status:   Fail,
			findings: []wantFinding{{KindTestTimeout, mod, "TestHang", "h_test.go", "test timed out", 20}},
		},
		{
			name: "package fails outside tests",
			in: Input{ExitCode: 1, ModulePath: mod, Stdout: []byte(
				ev("start", mod, "", "") +
					ev("output", mod, "", "setup: cannot open fixture\n") +
					ev("output", mod, "", "FAIL\tex.test/m\t0.010s\n") +
					ev("fail", mod, "", ""))},
			status:   Fail,
			findings: []wantFinding{{KindPackage, mod, "", "", "setup: cannot open fixture", 0}},
		},
		{
			name: "package exits without output",
			in: Input{ExitCode: 1, ModulePath: mod, Stdout: []byte(
				ev("output", mod, "", "exit status 3\n") + ev("output", mod, "", "FAIL\tex.test/m\t0.010s\n") + ev("fail", mod, "", ""))},
			status:   Fail,
			findings: []wantFinding{{KindPackage, mod, "", "", "exit status 3", 0}},
		},
		{
			// Synthesized in the shape go1.20-go1.23 print: the summary is an
			// output event, the compiler errors are text on stderr.
			name: "build failure as stderr text (before Go 1.24)",
			in: Input{ExitCode: 1, ModulePath: mod, ModuleDir: dir,
				Stdout: []byte(ev("start", mod+"/bad", "", "") +
					ev("output", mod+"/bad", "", "FAIL\tex.test/m/bad [build failed]\n") +
					ev("fail", mod+"/bad", "", "") + passing(mod)),
				Stderr: []byte("# ex.test/m/bad [ex.test/m/bad.test]\n" +
					"bad/bad_test.go:6:14: cannot use Name() (value of type string) as int value in variable declaration\n"),
				Packages: []string{mod, mod + "/bad"}},
			status: Fail,
			findings: []wantFinding{{KindBuild, mod + "/bad", "", "bad/bad_test.go",
				"cannot use Name() (value of type string) as int value in variable declaration", 6}},
		},
		{
			name: "build failure as a plain stdout line, errors lost",
			in: Input{ExitCode: 2, ModulePath: mod,
				Stdout:   []byte("FAIL\tex.test/m/bad [setup failed]\n" + passing(mod)),
				Packages: []string{mod, mod + "/bad"}},
			status:   Fail,
			findings: []wantFinding{{KindBuild, mod + "/bad", "", "", "setup failed", 0}},
		},
		{
			name: "build failure events (Go 1.24+) for a dependency",
			in: Input{ExitCode: 1, ModulePath: mod, Stdout: []byte(
				`{"ImportPath":"ex.test/m/c","Action":"build-output","Output":"# ex.test/m/d\n"}` + "\n" +
					`{"ImportPath":"ex.test/m/c","Action":"build-output","Output":"package ex.test/m/c\n"}` + "\n" +
					`{"ImportPath":"ex.test/m/c","Action":"build-output","Output":"\timports ex.test/m/d from c.go\n"}` + "\n" +
					`{"ImportPath":"ex.test/m/c","Action":"build-output","Output":"\timports ex.test/m/c from d.go: import cycle not allowed\n"}` + "\n" +
					`{"ImportPath":"ex.test/m/c","Action":"build-fail"}` + "\n" +
					ev("start", mod+"/d", "", "") +
					ev("output", mod+"/d", "", "FAIL\tex.test/m/d [setup failed]\n") +
					`{"Action":"fail","Package":"ex.test/m/d","Elapsed":0,"FailedBuild":"ex.test/m/c"}` + "\n")},
			status:   Fail,
			findings: []wantFinding{{KindBuild, mod + "/d", "", "", "package ex.test/m/c imports ex.test/m/d from c.go imports ex.test/m/c from d.go: import cycle not allowed", 0}},
		},
		{
			name:   "unknown actions are ignored",
			in:     Input{Stdout: []byte(`{"Action":"attr","Package":"ex.test/m","Test":"TestA","Key":"k","Value":"v"}` + "\n" + passing(mod))},
			status: Pass,
		},
		{
			name:   "progress on stderr",
			in:     Input{Stdout: []byte(passing(mod)), Stderr: []byte("go: downloading ex.test/dep v1.0.0\n")},
			status: Pass,
		},
		{
			name:   "go command error on stderr",
			in:     Input{ExitCode: 1, Stderr: []byte("go: updates to go.mod needed; to update it:\n\tgo mod tidy\n")},
			status: Inconclusive, reasons: []string{"the go command failed", "no packages were tested"},
			findings: []wantFinding{{KindToolchain, "", "", "", "updates to go.mod needed; to update it: go mod tidy", 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, ParseTest(tt.in), tt.status, tt.reasons, tt.findings)
		})
	}
}

func TestParseBuildAndVet(t *testing.T) {
	tests := []struct {
		name     string
		vet      bool
		in       Input
		status   Status
		reasons  []string
		findings []wantFinding
	}{
		{name: "zero input", in: Input{}, status: Pass},
		{name: "exit 1 without output", in: Input{ExitCode: 1}, status: Inconclusive, reasons: []string{"exit status 1 that no finding explains"}},
		{
			name: "compile errors with header", in: Input{ExitCode: 1, ModulePath: mod, ModuleDir: dir,
				Stderr: []byte("# ex.test/m/p\n./p/p.go:7:36: undefined: x\n/src/m/p/q.go:3:1: missing return\n")},
			status: Fail, findings: []wantFinding{
				{KindBuild, mod + "/p", "", "p/p.go", "undefined: x", 7},
				{KindBuild, mod + "/p", "", "p/q.go", "missing return", 3},
			},
		},
		{
			name: "continuation lines", in: Input{ExitCode: 1, ModulePath: mod,
				Stderr: []byte("a.go:3:9: not enough return values\n\thave ()\n\twant (int)\n")},
			status: Fail, findings: []wantFinding{{KindBuild, mod, "", "a.go", "not enough return values have () want (int)", 3}},
		},
		{
			name: "exit 0 with findings", in: Input{ModulePath: mod, Stderr: []byte("a.go:1:1: something\n")},
			status: Inconclusive, reasons: []string{"exit status 0 with 1 findings"},
			findings: []wantFinding{{KindBuild, mod, "", "a.go", "something", 1}},
		},
		{
			name: "matched no packages", in: Input{Stderr: []byte("go: warning: \"./...\" matched no packages\n")},
			status: Inconclusive, reasons: []string{"the go command failed"},
			findings: []wantFinding{{KindToolchain, "", "", "", `warning: "./..." matched no packages`, 0}},
		},
		{
			name: "no main packages", in: Input{ExitCode: 1, Stderr: []byte("go: no main packages to build\n")},
			status: Inconclusive, reasons: []string{"the go command failed"},
			findings: []wantFinding{{KindToolchain, "", "", "", "no main packages to build", 0}},
		},
		{name: "timed out", in: Input{TimedOut: true, ExitCode: -1}, status: Inconclusive, reasons: []string{"timed out", "exit status -1"}},
		{name: "truncated", in: Input{Truncated: true}, status: Inconclusive, reasons: []string{"output truncated"}},
		{
			name: "vet diagnostics without headers", vet: true, in: Input{ExitCode: 1, ModulePath: mod,
				Stderr: []byte("x.go:2:23: self-assignment of q\ne/e.go:3:10: G passes lock by value: sync.Mutex\n")},
			status: Fail, findings: []wantFinding{
				{KindVet, mod, "", "x.go", "self-assignment of q", 2},
				{KindVet, mod + "/e", "", "e/e.go", "G passes lock by value: sync.Mutex", 3},
			},
		},
		{
			name: "vet on code that does not type-check", vet: true, in: Input{ExitCode: 1, ModulePath: mod,
				Stderr: []byte("# ex.test/m\n# [ex.test/m]\nvet: ./lib_test.go:6:14: cannot use Name() (value of type string) as int value\n")},
			status: Fail, findings: []wantFinding{{KindBuild, mod, "", "lib_test.go", "cannot use Name() (value of type string) as int value", 6}},
		},
		{
			name: "vet load error", vet: true, in: Input{ExitCode: 1, ModulePath: mod, ModuleDir: "/tmp/x1",
				Stderr: []byte("a/a.go:2:8: cannot find module providing package ex.test/nope: reading file:///tmp/proxy123/ex.test/nope/@v/list: no such file or directory\n")},
			status: Fail, findings: []wantFinding{{KindVet, mod + "/a", "", "a/a.go",
				"cannot find module providing package ex.test/nope: reading file://$TMP/ex.test/nope/@v/list: no such file or directory", 2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parse := ParseBuild
			if tt.vet {
				parse = ParseVet
			}
			check(t, parse(tt.in), tt.status, tt.reasons, tt.findings)
		})
	}
}

func check(t *testing.T, r *Report, status Status, reasons []string, findings []wantFinding) {
	t.Helper()
	if r.Status != status {
		t.Errorf("Status = %s; want %s (reasons %q)", r.Status, status, r.Reasons)
	}
	if len(r.Reasons) != len(reasons) {
		t.Errorf("Reasons = %q; want %d matching %q", r.Reasons, len(reasons), reasons)
	} else {
		for i, w := range reasons {
			if !strings.Contains(r.Reasons[i], w) {
				t.Errorf("Reasons[%d] = %q; want it to contain %q", i, r.Reasons[i], w)
			}
		}
	}
	if len(r.Findings) != len(findings) {
		t.Fatalf("Findings = %+v; want %d", r.Findings, len(findings))
	}
	for i, w := range findings {
		f := r.Findings[i]
		got := wantFinding{f.Kind, f.Package, f.Test, f.File, f.Message, f.Line}
		if got != w {
			t.Errorf("Findings[%d] = %+v; want %+v", i, got, w)
		}
		if f.Key != Key(f) || !strings.HasPrefix(f.Key, string(f.Kind)+":") {
			t.Errorf("Findings[%d].Key = %q; want Key(f) = %q", i, f.Key, Key(f))
		}
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct{ in, moduleDir, want string }{
		{"got 1 after 1.5s; want 2", "", "got 1 after <dur>; want 2"},
		{"took 1m2.5s and 300ms and 15µs", "", "took <dur> and <dur> and <dur>"},
		{"object at 0xc000123abc", "", "object at 0x?"},
		{"goroutine 42 [running]", "", "goroutine N [running]"},
		{"open /tmp/TestX123/001/f: no such file", "", "open $TMP/001/f: no such file"},
		{"/tmp/go-build998877/b001/x.test", "", "$TMP/b001/x.test"},
		{"see /src/m/p/q.go:12:3 for details", "/src/m", "see p/q.go for details"},
		{"in /home/u/go/pkg/mod/ex.test/dep@v1.0.0/d.go:5", "", "in $GOMODCACHE/ex.test/dep@v1.0.0/d.go"},
		{"at /usr/local/go/src/runtime/panic.go:860", "", "at $GOROOT/src/runtime/panic.go"},
		{"dial tcp 127.0.0.1:34567: refused", "", "dial tcp 127.0.0.1:<port>: refused"},
		{"at 2026-12-02T10:04:16.942185324Z", "", "at <time>"},
		{"2026/12/02 11:07:01 connecting to db", "", "<time> connecting to db"},
		{"2026/12/02 11:07:01.123456 x.go:12: retry", "", "<time> x.go: retry"},
		{"log: 2026/12/02 11:07:01 a, then 2026/12/03 09:00:00.5 b", "", "log: <time> a, then <time> b"},
		{"release 2026/12/02 stays", "", "release 2026/12/02 stays"},
		{"panic: boom [recovered]", "", "panic: boom"},
		{"go.mod requires go >= 1.99 (running go 1.26.8; GOTOOLCHAIN=local)", "", "go.mod requires go >= 1.99 (running go <version>; GOTOOLCHAIN=local)"},
		{"  many\t\tspaces\n here ", "", "many spaces here"},
		{"Add(2, 2) = 0; want 4", "", "Add(2, 2) = 0; want 4"},
		{"version v2s and x1h stay", "", "version v2s and x1h stay"},
	}
	for _, tt := range tests {
		if got := Normalize(tt.in, tt.moduleDir); got != tt.want {
			t.Errorf("Normalize(%q, %q) = %q; want %q", tt.in, tt.moduleDir, got, tt.want)
		}
	}
}

// TestKey_Stable: the same problem seen from two runs in different
// directories, at different lines and times, has one key; a different
// problem has another.
func TestKey_Stable(t *testing.T) {
	run := func(moduleDir string, line, ms int, msg string) Finding {
		stdout := ev("run", mod, "TestA", "") +
			ev("output", mod, "TestA", "    a_test.go:"+itoa(line)+": "+msg+" after "+itoa(ms)+"ms in "+moduleDir+"/data\n") +
			ev("fail", mod, "TestA", "") + ev("fail", mod, "", "")
		r := ParseTest(Input{Stdout: []byte(stdout), ExitCode: 1, ModulePath: mod, ModuleDir: moduleDir})
		if len(r.Findings) != 1 {
			t.Fatalf("findings = %+v; want 1", r.Findings)
		}
		return r.Findings[0]
	}
	a := run("/tmp/run1/m", 9, 12, "boom")
	b := run("/home/ci/work/m", 40, 3400, "boom")
	c := run("/tmp/run1/m", 9, 12, "bang")
	if a.Key != b.Key {
		t.Errorf("same problem, different keys: %q (%q) vs %q (%q)", a.Key, a.Message, b.Key, b.Message)
	}
	if a.Key == c.Key {
		t.Errorf("different problems, one key %q", a.Key)
	}
}

// TestKey_StableLogOutput: a test that fails after log output has the
// same key whenever it runs, though its message starts with the time.
func TestKey_StableLogOutput(t *testing.T) {
	run := func(stamp string) Finding {
		stdout := ev("run", mod, "TestA", "") +
			ev("output", mod, "TestA", stamp+" db: connection refused\n") +
			ev("output", mod, "TestA", "--- FAIL: TestA (0.01s)\n") +
			ev("fail", mod, "TestA", "") + ev("fail", mod, "", "")
		r := ParseTest(Input{Stdout: []byte(stdout), ExitCode: 1, ModulePath: mod, ModuleDir: "/tmp/m"})
		if len(r.Findings) != 1 {
			t.Fatalf("findings = %+v; want 1", r.Findings)
		}
		return r.Findings[0]
	}
	a := run("2026/12/02 11:07:01")
	b := run("2026/12/03 08:00:59")
	c := run("2026/12/03 08:00:59.123456")
	if a.Message != "<time> db: connection refused" || a.Key != b.Key || a.Key != c.Key {
		t.Errorf("keys %q, %q, %q (message %q); want one key, message %q", a.Key, b.Key, c.Key, a.Message, "<time> db: connection refused")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
func TestReport_Caps(t *testing.T) {
	var stderr strings.Builder
	for i := 0; i < MaxFindings+5; i++ {
		stderr.WriteString("a.go:1:1: error number " + itoa(i+1) + "\n")
	}
	stderr.WriteString("b.go:1:1: " + strings.Repeat("y", 2*MaxMessageBytes) + "\n")
	r := ParseBuild(Input{ExitCode: 1, Stderr: []byte(stderr.String())})
	if len(r.Findings) != MaxFindings || r.Dropped != 6 || r.Status != Fail {
		t.Errorf("findings %d, dropped %d, status %s; want %d, 6, fail", len(r.Findings), r.Dropped, r.Status, MaxFindings)
	}
	r = ParseBuild(Input{ExitCode: 1, Stderr: []byte("b.go:1:1: " + strings.Repeat("y", 2*MaxMessageBytes) + "\n\t" + strings.Repeat("z", 2*MaxDetailBytes) + "\n")})
	if f := r.Findings[0]; len(f.Message) > MaxMessageBytes || len(f.Detail) > MaxDetailBytes {
		t.Errorf("message %d bytes, detail %d bytes; want at most %d, %d", len(f.Message), len(f.Detail), MaxMessageBytes, MaxDetailBytes)
	}
}
