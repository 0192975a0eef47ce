// Package testjson turns what the Go toolchain printed while validating a
// module (`go test -json`, `go build`, `go vet`) into a verdict and a list
// of findings with stable keys.
//
// The output comes from untrusted code and from a run that may have been
// cut short, so parsing fails closed: anything the parser cannot account
// for (a timeout, truncated output, a non-JSON line, a package with no
// final event, an exit status that disagrees with the events, a go command
// error) makes the verdict Inconclusive with reasons, never Pass. A package
// that fails to build is a conclusive finding for that package however the
// toolchain reported it: as build-output/build-fail events (Go 1.24 and
// later), or as text on stderr with a "[build failed]" or "[setup failed]"
// line (earlier releases).
//
// Finding keys are computed from the kind, package, test, module-relative
// file and a normalized message (no line numbers, absolute paths, temporary
// directory names, durations, addresses or goroutine IDs), so the same
// problem keeps its key across runs, machines and unrelated edits.
package testjson

import (
	"crypto/sha256"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Status is a check's verdict. Values are stable: reports print them.
type Status string

const (
	// Pass: the check ran to completion and found nothing.
	Pass Status = "pass"
	// Fail: the check ran and every failure is explained by a finding.
	Fail Status = "fail"
	// Inconclusive: the output cannot support a verdict; Reasons say why.
	Inconclusive Status = "inconclusive"
)

// Kind says what a finding is. Values are stable: they are part of keys.
type Kind string

const (
	// KindTest: a test failed (or panicked).
	KindTest Kind = "test"
	// KindTestTimeout: go test's own -timeout stopped a test.
	KindTestTimeout Kind = "test_timeout"
	// KindPackage: a test binary failed outside any test (a panic in init
	// or TestMain, os.Exit, a crash).
	KindPackage Kind = "package"
	// KindBuild: a package or its test binary failed to build, load or
	// pass the vet checks go test runs.
	KindBuild Kind = "build"
	// KindVet: a go vet diagnostic.
	KindVet Kind = "vet"
	// KindToolchain: the go command failed before judging the code, such
	// as "go: go.mod requires go >= 1.99". It makes a check Inconclusive.
	KindToolchain Kind = "toolchain"
)

// Limits on what a Report keeps, so hostile output cannot make it huge.
const (
	// MaxFindings is the most findings a Report keeps; Report.Dropped
	// counts the rest.
	MaxFindings = 1000
	// MaxDetailBytes caps Finding.Detail, in bytes.
	MaxDetailBytes = 4 << 10
	// MaxMessageBytes caps Finding.Message, in bytes, before hashing.
	MaxMessageBytes = 1 << 10
	// maxTestLines is how many output lines are kept per test or package
	// to find a failure message in.
	maxTestLines = 200
	// maxReasonQuote caps quoted output in a reason, in bytes.
	maxReasonQuote = 200
)

// Input is what one toolchain command left behind. The zero value is a
// command that printed nothing and exited 0, which ParseTest judges
// Inconclusive (no packages) and ParseBuild and ParseVet judge Pass.
type Input struct {
	// Stdout and Stderr are the captured streams, possibly cut at a cap.
	Stdout, Stderr []byte
	// ExitCode is the command's exit status; -1 when it was killed.
	ExitCode int
	// TimedOut reports that the command was stopped by a deadline.
	TimedOut bool
	// Truncated reports that either stream was cut at its cap.
	Truncated bool
	// ModulePath is the module path, used to map files to packages.
	ModulePath string
	// ModuleDir is the absolute directory the command ran in (the module
	// root, as the command saw it: a path inside the container). Paths
	// under it are made relative; "" strips nothing.
	ModuleDir string
	// Packages lists the import paths `go list ./...` printed. ParseTest
	// requires a final event for each; nil means unknown (then only the
	// packages seen in events are checked).
	Packages []string
}

// Finding is one problem, keyed so it can be matched across runs.
type Finding struct {
	// Key identifies the problem: "<kind>:<16 hex digits>", a hash of
	// Kind, Package, Test, File and Message.
	Key  string `json:"key"`
	Kind Kind   `json:"kind"`
	// Package is the import path; "" when unknown.
	Package string `json:"package,omitempty"`
	// Test is the test name ("TestX/sub"); "" for package-level findings.
	Test string `json:"test,omitempty"`
	// File is the slash path relative to the module root; "" when unknown.
	// Paths outside the module keep a "$GOROOT"/"$GOMODCACHE"-style prefix.
	File string `json:"file,omitempty"`
	// Line and Col locate the problem for people (1-based; 0 unknown).
	// They are not part of Key.
	Line int `json:"line,omitempty"`
	Col  int `json:"col,omitempty"`
	// Message is the normalized message (see Normalize); part of Key.
	Message string `json:"message"`
	// Detail is raw output around the problem, at most MaxDetailBytes;
	// not part of Key.
	Detail string `json:"detail,omitempty"`
}

// TestResult is a test's final event.
type TestResult struct {
	Name string `json:"name"`
	// Status is "pass", "fail", "skip", or "" when the test never ended.
	Status string `json:"status"`
	// Elapsed is the test's run time in seconds, as go test reported it.
	Elapsed float64 `json:"elapsed"`
}

// PackageResult is a package's final event and its tests.
type PackageResult struct {
	Path string `json:"path"`
	// Status is "pass", "fail", "skip" (no test files), or "" when no
	// final event arrived.
	Status string `json:"status"`
	// Elapsed is in seconds.
	Elapsed float64 `json:"elapsed"`
	// BuildFailed reports that the package or its test binary did not build.
	BuildFailed bool         `json:"build_failed,omitempty"`
	Tests       []TestResult `json:"tests,omitempty"`
}

// Report is the verdict on one check.
type Report struct {
	Status Status `json:"status"`
	// Reasons say why Status is Inconclusive; empty otherwise.
	Reasons []string `json:"reasons,omitempty"`
	// Findings are sorted by package, test, file, line and key.
	Findings []Finding `json:"findings,omitempty"`
	// Dropped counts findings beyond MaxFindings.
	Dropped int `json:"dropped,omitempty"`
	// Packages is set by ParseTest, sorted by path.
	Packages []PackageResult `json:"packages,omitempty"`
}

func (r *Report) add(f Finding) {
	if f.Message == "" {
		f.Message = "(no message)"
	}
	if len(f.Message) > MaxMessageBytes {
		f.Message = f.Message[:MaxMessageBytes]
	}
	if len(f.Detail) > MaxDetailBytes {
		f.Detail = f.Detail[:MaxDetailBytes]
	}
	f.Key = Key(f)
	for _, g := range r.Findings {
		if g.Key == f.Key {
			return // the same problem reported twice (e.g. two lines, one message)
		}
	}
	if len(r.Findings) >= MaxFindings {
		r.Dropped++
		return
	}
	r.Findings = append(r.Findings, f)
}

func (r *Report) reason(format string, args ...any) {
	r.Reasons = append(r.Reasons, fmt.Sprintf(format, args...))
}

// finish sorts the findings and sets Status from reasons and findings.
func (r *Report) finish() {
	sort.Slice(r.Findings, func(i, j int) bool {
		a, b := r.Findings[i], r.Findings[j]
		if a.Package != b.Package {
			return a.Package < b.Package
		}
		if a.Test != b.Test {
			return a.Test < b.Test
		}
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Key < b.Key
	})
	switch {
	case len(r.Reasons) > 0:
		r.Status = Inconclusive
	case len(r.Findings) > 0:
		r.Status = Fail
	default:
		r.Status = Pass
	}
}

// Key returns f's stable key: "<kind>:" and the first 16 hex digits of a
// SHA-256 over Kind, Package, Test, File and Message. Line, Col and
// Detail do not count.
func Key(f Finding) string {
	h := sha256.New()
	for _, s := range []string{string(f.Kind), f.Package, f.Test, f.File, f.Message} {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return fmt.Sprintf("%s:%x", f.Kind, h.Sum(nil)[:8])
}

var normalizers = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Positions inside messages: "x.go:12:3" and "x.go:12" lose the numbers.
	{regexp.MustCompile(`(\.go|\.s|\.c):\d+(:\d+)?`), "$1"},
	// Module cache and GOROOT paths differ between machines.
	{regexp.MustCompile(`(?:/[^\s/:'"()]+)*/pkg/mod/`), "$$GOMODCACHE/"},
	{regexp.MustCompile(`(?:/[^\s/:'"()]+)*/(?:go|goroot|golang)/src/`), "$$GOROOT/src/"},
	// Temporary directories: /tmp/go-build123/b001, /tmp/TestX123/001.
	{regexp.MustCompile(`(?:/tmp|/var/folders/[^\s]+?/T)/[^\s/:'"()]+`), "$$TMP"},
	{regexp.MustCompile(`go-build\d+`), "go-build"},
	// Timestamps (RFC 3339 and the log package's "2026/12/02 11:07:01",
	// with or without microseconds), then durations such as 1.5s, 300ms,
	// 1m2.5s, 2h0m0s.
	{regexp.MustCompile(`\b(?:\d{4}-\d\d-\d\d[T ]|\d{4}/\d\d/\d\d )\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?`), "<time>"},
	{regexp.MustCompile(`\b(?:\d+(?:\.\d+)?(?:h|m|s|ms|µs|us|ns))+\b`), "<dur>"},
	// Addresses and pointers, goroutine IDs, ports after an IP.
	{regexp.MustCompile(`0x[0-9a-fA-F]+`), "0x?"},
	{regexp.MustCompile(`goroutine \d+`), "goroutine N"},
	{regexp.MustCompile(`\b(\d{1,3}(?:\.\d{1,3}){3}|\[::1?\]|localhost):\d+`), "$1:<port>"},
	// The running toolchain's version differs between machines.
	{regexp.MustCompile(`running go \d+\.\d+(?:\.\d+|(?:rc|beta)\d+)?`), "running go <version>"},
	// Go 1.25 added ", repanicked" to recovered panics; keys should not
	// change with the toolchain.
	{regexp.MustCompile(` \[recovered(?:, repanicked)?\]`), ""},
	{regexp.MustCompile(`\s+`), " "},
}

// Normalize rewrites msg so that it no longer depends on where or when it
// was produced: moduleDir (if not "") and its trailing slash are removed,
// and positions, machine-specific paths, temporary directory names,
// timestamps, durations, hexadecimal addresses, goroutine IDs, local ports
// and the running toolchain's version are replaced by placeholders; runs of white space become one space.
func Normalize(msg, moduleDir string) string {
	if moduleDir != "" {
		d := strings.TrimSuffix(moduleDir, "/")
		msg = strings.ReplaceAll(msg, d+"/", "")
		msg = strings.ReplaceAll(msg, d, ".")
	}
	for _, n := range normalizers {
		msg = n.re.ReplaceAllString(msg, n.repl)
	}
	return strings.TrimSpace(msg)
}

// posRE matches a compiler or vet diagnostic: file.go:line[:col]: message.
var posRE = regexp.MustCompile(`^(\S+?\.(?:go|s|c|h|mod|sum|work)):(\d+)(?::(\d+))?: ?(.*)$`)

// modRel maps a path the go command printed (relative to the module root,
// where it ran, or absolute) to a slash path relative to the module root.
// Paths outside the module are normalized like messages.
func modRel(p, moduleDir string) string {
	if strings.HasPrefix(p, "/") {
		d := strings.TrimSuffix(moduleDir, "/")
		if d != "" && strings.HasPrefix(p, d+"/") {
			return path.Clean(p[len(d)+1:])
		}
		return Normalize(p, "")
	}
	return path.Clean(p)
}

// pkgOf returns the import path of the package holding the module-relative
// file, or "" when the file is outside the module or the module path is
// unknown.
func pkgOf(file, modulePath string) string {
	if modulePath == "" || file == "" || strings.HasPrefix(file, "..") || strings.HasPrefix(file, "$") || strings.HasPrefix(file, "/") {
		return ""
	}
	if d := path.Dir(file); d != "." {
		return modulePath + "/" + d
	}
	return modulePath
}

// pkgDir returns the slash directory of package pkg relative to the module
// root, or "" when pkg is outside the module.
func pkgDir(pkg, modulePath string) (string, bool) {
	switch {
	case modulePath == "":
		return "", false
	case pkg == modulePath:
		return ".", true
	case strings.HasPrefix(pkg, modulePath+"/"):
		return pkg[len(modulePath)+1:], true
	}
	return "", false
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func quote(s string) string {
	if len(s) > maxReasonQuote {
		s = s[:maxReasonQuote] + "..."
	}
	return strconv.Quote(s)
}

func lines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
