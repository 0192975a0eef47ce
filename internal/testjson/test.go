package testjson

import (
	"encoding/json"
	"path"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json) output. Build
// events (Go 1.24+) carry ImportPath instead of Package.
type event struct {
	Action      string
	Package     string
	Test        string
	Output      *string
	Elapsed     float64
	ImportPath  string
	FailedBuild string
}

type testState struct {
	final   string
	elapsed float64
	out     []string
}

type pkgState struct {
	final       string
	elapsed     float64
	buildFailed string // "build" or "setup" when a [... failed] line was seen
	failedBuild string // the FailedBuild import path
	out         []string
	tests       map[string]*testState
}

func (p *pkgState) test(name string) *testState {
	t := p.tests[name]
	if t == nil {
		t = &testState{}
		p.tests[name] = t
	}
	return t
}

func keep(out []string, s string) []string {
	if len(out) < maxTestLines {
		out = append(out, strings.TrimSuffix(s, "\n"))
	}
	return out
}

// failLineRE matches go test's summary for a package that did not build,
// as an output event or a plain line.
var failLineRE = regexp.MustCompile(`^FAIL\s+(\S+) \[(build|setup) failed\]$`)

// logRE matches a t.Log/t.Error line: indented "file.go:line: message".
var logRE = regexp.MustCompile(`^\s+(\S+\.go):(\d+): (.*)$`)

// timeoutRE matches go test's -timeout panic.
var timeoutRE = regexp.MustCompile(`^panic: test timed out after `)

// ParseTest judges `go test -json` output. Stdout must hold only test2json
// events; stderr may hold build errors in the pre-1.24 text form.
//
// It is Inconclusive when the run timed out or was truncated, stdout has a
// line that is not an event, a package (from in.Packages or the events)
// has no final pass/fail/skip event, no package was seen at all, the exit
// status is 0 despite failures, or it is non-zero and nothing failed.
func ParseTest(in Input) *Report {
	r := &Report{}
	common(r, in)
	pkgs := make(map[string]*pkgState)
	pkg := func(p string) *pkgState {
		s := pkgs[p]
		if s == nil {
			s = &pkgState{tests: make(map[string]*testState)}
			pkgs[p] = s
		}
		return s
	}
	for _, p := range in.Packages {
		pkg(p)
	}
	builds := make(map[string][]string) // build-output by ImportPath

	nonJSON := 0
	outLines := lines(in.Stdout)
	if in.Truncated && len(outLines) > 0 && !strings.HasSuffix(string(in.Stdout), "\n") {
		// The cap cut the last line; "output truncated" already says so.
		outLines = outLines[:len(outLines)-1]
	}
	for _, line := range outLines {
		if line == "" {
			continue
		}
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Action == "" {
			if m := failLineRE.FindStringSubmatch(line); m != nil {
				pkg(m[1]).buildFailed = m[2]
				pkg(m[1]).final = "fail"
				continue
			}
			if nonJSON == 0 {
				r.reason("stdout has a line that is not a test event: %s", quote(line))
			}
			nonJSON++
			continue
		}
		out := ""
		if e.Output != nil {
			out = *e.Output
		}
		switch e.Action {
		case "build-output":
			builds[e.ImportPath] = append(builds[e.ImportPath], strings.TrimSuffix(out, "\n"))
			continue
		case "build-fail":
			continue
		}
		if e.Package == "" {
			continue // an event we do not know; it cannot hide a failure
		}
		p := pkg(e.Package)
		if e.Test == "" {
			switch e.Action {
			case "output":
				if m := failLineRE.FindStringSubmatch(strings.TrimSuffix(out, "\n")); m != nil {
					p.buildFailed = m[2]
				}
				p.out = keep(p.out, out)
			case "pass", "fail", "skip":
				p.final, p.elapsed = e.Action, e.Elapsed
				if e.FailedBuild != "" {
					p.failedBuild = e.FailedBuild
					if p.buildFailed == "" {
						p.buildFailed = "build"
					}
				}
			}
			continue
		}
		t := p.test(e.Test)
		switch e.Action {
		case "output":
			t.out = keep(t.out, out)
		case "pass", "fail", "skip":
			t.final, t.elapsed = e.Action, e.Elapsed
		}
	}
	if nonJSON > 1 {
		r.reason("%d more lines on stdout are not test events", nonJSON-1)
	}

	// Build output: Go 1.24+ events first, then pre-1.24 stderr text.
	ips := make([]string, 0, len(builds))
	for ip := range builds {
		ips = append(ips, ip)
	}
	sort.Strings(ips)
	for _, ip := range ips {
		diagnostics(r, []byte(strings.Join(builds[ip], "\n")), in, KindBuild, false)
	}
	var stray []string
	for _, line := range lines(in.Stderr) {
		if m := failLineRE.FindStringSubmatch(line); m != nil {
			pkg(m[1]).buildFailed = m[2]
			pkg(m[1]).final = "fail"
			continue
		}
		stray = append(stray, line)
	}
	diagnostics(r, []byte(strings.Join(stray, "\n")), in, KindBuild, true)
	// Stderr is not where go test reports failures of code that built:
	// progress lines aside, a go command error there means the packages
	// were not all judged.
	for i := range r.Findings {
		if r.Findings[i].Kind == KindToolchain {
			r.reason("the go command failed: %s", quote(r.Findings[i].Message))
			break
		}
	}

	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	if len(names) == 0 {
		r.reason("no packages were tested")
	}
	failed := false
	for _, name := range names {
		p := pkgs[name]
		res := PackageResult{Path: name, Status: p.final, Elapsed: p.elapsed, BuildFailed: p.buildFailed != ""}
		tnames := make([]string, 0, len(p.tests))
		for tn := range p.tests {
			tnames = append(tnames, tn)
		}
		sort.Strings(tnames)
		for _, tn := range tnames {
			t := p.tests[tn]
			res.Tests = append(res.Tests, TestResult{Name: tn, Status: t.final, Elapsed: t.elapsed})
		}
		r.Packages = append(r.Packages, res)
		switch p.final {
		case "":
			r.reason("no final event for package %s", name)
			continue
		case "fail":
			failed = true
		}
		packageFindings(r, in, name, p, tnames)
	}
	toolchain := false
	for _, f := range r.Findings {
		if f.Kind == KindToolchain {
			toolchain = true
		} else {
			failed = true
		}
	}
	switch {
	case in.ExitCode == 0 && failed && !in.TimedOut:
		r.reason("exit status 0 despite failures")
	case in.ExitCode != 0 && !failed && !toolchain && !in.TimedOut:
		r.reason("exit status %d that no finding explains; stderr: %s", in.ExitCode, quote(string(in.Stderr)))
	}
	r.finish()
	return r
}

// packageFindings adds the findings for one package that ended.
func packageFindings(r *Report, in Input, name string, p *pkgState, tnames []string) {
	if p.final != "fail" {
		return
	}
	explained := false
	if p.buildFailed != "" {
		for _, f := range r.Findings {
			if f.Package == name && f.Kind == KindBuild {
				explained = true
				break
			}
		}
		if !explained {
			// The errors went somewhere we did not see (or were reported
			// for a dependency): still a conclusive finding for this package.
			r.add(Finding{Kind: KindBuild, Package: name, Message: p.buildFailed + " failed", Detail: strings.Join(p.out, "\n")})
		}
		return
	}
	dir, inModule := pkgDir(name, in.ModulePath)
	for _, tn := range tnames {
		t := p.tests[tn]
		switch t.final {
		case "fail":
			if hasFailedChild(p, tn) && !hasOwnMessage(t.out) {
				continue // its failed subtests are the findings
			}
		case "":
			// Never ended: go test's -timeout, or a panic in another test.
		default:
			continue
		}
		explained = true
		f := Finding{Kind: KindTest, Package: name, Test: tn}
		out := t.out
		if t.final == "" && !hasOwnMessage(out) {
			// Before Go 1.24's attribution, a timeout panic was package output.
			out = append(append([]string(nil), out...), p.out...)
		}
		describe(&f, out, in, dir, inModule)
		if t.final == "" && f.Kind != KindTestTimeout {
			f.Message = "did not finish: " + f.Message
		}
		r.add(f)
	}
	if explained {
		return
	}
	f := Finding{Kind: KindPackage, Package: name}
	describe(&f, p.out, in, dir, inModule)
	r.add(f)
}

func hasFailedChild(p *pkgState, name string) bool {
	for tn, t := range p.tests {
		if t.final == "fail" && strings.HasPrefix(tn, name+"/") {
			return true
		}
	}
	return false
}

func hasOwnMessage(out []string) bool {
	for _, l := range out {
		if logRE.MatchString(l) || strings.HasPrefix(l, "panic: ") {
			return true
		}
	}
	return false
}

// boilerplate reports lines go test prints around every test.
func boilerplate(l string) bool {
	t := strings.TrimSpace(l)
	return t == "" || t == "PASS" || t == "FAIL" ||
		strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") ||
		strings.HasPrefix(t, "FAIL\t") || strings.HasPrefix(t, "ok  \t") ||
		strings.HasPrefix(t, "exit status ") || strings.HasPrefix(t, "coverage: ")
}

// describe fills f's message, file and detail from a test's or package's
// output: a panic first (with the first stack frame in the module as its
// file), then the first t.Error/t.Log line, then the first other line,
// then the exit status.
func describe(f *Finding, out []string, in Input, dir string, inModule bool) {
	f.Detail = strings.Join(out, "\n")
	for i, l := range out {
		if !strings.HasPrefix(l, "panic: ") {
			continue
		}
		f.Message = Normalize(l, in.ModuleDir)
		if timeoutRE.MatchString(l) {
			f.Kind = KindTestTimeout
			f.Message = "test timed out"
		}
		f.File, f.Line = frame(out[i+1:], in.ModuleDir)
		return
	}
	for _, l := range out {
		if m := logRE.FindStringSubmatch(l); m != nil {
			if inModule {
				f.File = path.Join(dir, m[1])
			}
			f.Line = atoi(m[2])
			f.Message = Normalize(m[3], in.ModuleDir)
			return
		}
	}
	exit := ""
	for _, l := range out {
		switch {
		case strings.HasPrefix(l, "exit status "):
			exit = l
		case !boilerplate(l):
			f.Message = Normalize(l, in.ModuleDir)
			return
		}
	}
	if exit != "" {
		f.Message = exit
		return
	}
	f.Message = "failed without output"
}

// frameRE matches a stack frame's position line: "\t/abs/file.go:12 +0x28".
var frameRE = regexp.MustCompile(`^\t(/\S+\.go):(\d+)`)

// frame returns the first stack position inside the module, relative to
// its root.
func frame(stack []string, moduleDir string) (string, int) {
	d := strings.TrimSuffix(moduleDir, "/")
	if d == "" {
		return "", 0
	}
	for _, l := range stack {
		if m := frameRE.FindStringSubmatch(l); m != nil && strings.HasPrefix(m[1], d+"/") {
			return m[1][len(d)+1:], atoi(m[2])
		}
	}
	return "", 0
}
