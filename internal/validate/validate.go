// Package validate runs the validation of one module snapshot — go list,
// go build, go vet and go test -json — and turns what the toolchain said
// into fail-closed checks for the report.
//
// Threat model: the module is hostile. Its code runs only inside the
// execute profile's container (no network, the snapshot and the module
// cache read-only, a fresh build cache, a throwaway writable copy of the
// snapshot as its working tree); this package only chooses the commands and
// reads their output. That output is attacker-controlled, so every way it
// can be unreadable — a timeout, a truncated stream, a line that is not
// JSON, a listed package without a final test event, a zero exit beside a
// failure, a non-zero exit no finding explains — makes the check
// inconclusive, never passing.
//
// The workflows that run validations (internal/inspect, internal/maintain)
// prepare the snapshot, its modules and the seed (internal/workflow);
// ValidateSnapshot, or StartValidation and ValidateIn, run one here.
package validate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/report"
)

// DefaultTimeout bounds one whole validation (list, build, vet and test
// together) when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// buildOutputDir is where go build writes the executables of main
// packages: /tmp, the container's tmpfs, so the build leaves the working
// tree as the tests will find it.
const buildOutputDir = "/tmp/stockade-build/"

// Check names, in the order the checks run.
const (
	CheckList  = "list"
	CheckBuild = "build"
	CheckVet   = "vet"
	CheckTest  = "test"
)

// Output is what one command did inside the validation's container. It is
// data about untrusted code, never an error of ours.
type Output struct {
	ExitCode  int
	Stdout    []byte // capped
	Stderr    []byte // capped
	Truncated bool   // either stream passed its cap
	TimedOut  bool   // killed at its deadline
	OOMKilled bool
}

// Execer runs one command in the module's directory of a container: for
// the validation, its execute container; for candidates, the acquire
// profile. The command is killed after timeout (zero means the runner's
// default), and Output.TimedOut says so. An error means the engine or
// Stockade failed, not the command.
type Execer interface {
	Exec(ctx context.Context, argv []string, timeout time.Duration) (Output, error)
}

// Options configure Run. The zero value uses DefaultTimeout and discards
// logs.
type Options struct {
	// Timeout bounds the whole validation; a step still running at it is
	// killed and its check is inconclusive, later steps do not run.
	// Zero means DefaultTimeout.
	Timeout time.Duration
	// ModulePath is the module's path, which maps files to packages in
	// findings.
	ModulePath string
	Logger     *slog.Logger // nil discards
}

// Result is a validation's checks and the time each step took.
type Result struct {
	Checks   []report.Check // list, build, vet, test
	Phases   []report.Phase // "validate/list", ...
	Packages []Package      // what go list found
}

// Package is one package go list found.
type Package struct {
	ImportPath string
	Name       string // package name; "main" for commands
}

// Run validates the module in ex's container: go list, then build, vet and
// test in order. Each step runs even when an earlier one failed, so the
// report shows every check; only the validation's deadline stops it.
func Run(ctx context.Context, ex Execer, o Options) (Result, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)

	var res Result
	killed := false // a step was killed at the deadline: the container may be gone
	step := func(name string, argv []string) (Output, bool, error) {
		left := time.Until(deadline)
		if left < MinStep || killed {
			return Output{}, false, nil
		}
		t := time.Now()
		out, err := ex.Exec(ctx, argv, left)
		d := time.Since(t)
		res.Phases = append(res.Phases, report.Phase{Name: "validate/" + name, MS: d.Milliseconds()})
		log.Debug("step done", "phase", name, "exit", out.ExitCode, "timedout", out.TimedOut, "truncated", out.Truncated, "dur", d)
		if err != nil {
			return out, true, fmt.Errorf("validate: %s: %w", name, err)
		}
		killed = out.TimedOut
		return out, true, nil
	}
	notRun := func(name string) report.Check {
		return report.Check{Name: name, Status: report.StatusNotRun, Findings: []report.Finding{}}
	}

	// go list: which packages exist, and which are commands.
	out, ran, err := step(CheckList, listArgv)
	if err != nil {
		return res, err
	}
	if !ran {
		res.Checks = append(res.Checks, notRun(CheckList), notRun(CheckBuild), notRun(CheckVet), notRun(CheckTest))
		return res, nil
	}
	list, pkgs := parseList(out)
	res.Checks = append(res.Checks, list)
	res.Packages = pkgs

	for _, s := range []struct {
		name  string
		argv  []string
		parse parser
	}{
		{CheckBuild, buildArgv(pkgs), parseBuild},
		{CheckVet, vetArgv, parseVet},
		{CheckTest, testArgv, parseTest},
	} {
		out, ran, err := step(s.name, s.argv)
		if err != nil {
			return res, err
		}
		if !ran {
			res.Checks = append(res.Checks, notRun(s.name))
			continue
		}
		c := s.parse(out, o.ModulePath, pkgs)
		c.Name = s.name
		// Whatever the parser made of a partial stream, a step that was
		// killed or cut short is inconclusive, and that is the reason.
		if reason := OutputReason(out); reason != "" && c.Status != report.StatusInconclusive {
			c.Status, c.Reasons = report.StatusInconclusive, append(c.Reasons, reason)
		}
		res.Checks = append(res.Checks, c)
	}
	return res, nil
}

// The commands. -e keeps go list going past broken packages so each error
// becomes a finding; the field list keeps its output small.
//
// Each passes -mod=readonly, which overrides the profile's GOFLAGS=-mod=mod
// for these commands only: a go command that decides go.mod needs
// updating says so (a finding) instead of rewriting the working tree's
// copy and judging another module than the repository's (acquisition
// makes the updates a developer's go command would, on a staging copy,
// and the report says so). -mod=readonly is also what go build does by
// default on the user's machine, so the verdict matches theirs. It cannot
// weaken anything: it only forbids writes.
var (
	listArgv = []string{"go", "list", "-mod=readonly", "-e", "-json=ImportPath,Name,Error,DepsErrors", "./..."}
	vetArgv  = []string{"go", "vet", "-mod=readonly", "./..."}
	testArgv = []string{"go", "test", "-mod=readonly", "-json", "-count=1", "./..."}
)

// buildArgv builds every package; with -o only when a main package exists,
// since go build ./... of a single command would write its executable into
// the working tree. Without main packages -o is left out:
// library-only modules must not fail for it.
func buildArgv(pkgs []Package) []string {
	for _, p := range pkgs {
		if p.Name == "main" {
			return []string{"go", "build", "-mod=readonly", "-o", buildOutputDir, "./..."}
		}
	}
	return []string{"go", "build", "-mod=readonly", "./..."}
}

// listPackage is one object of go list -json output.
type listPackage struct {
	ImportPath string
	Name       string
	Error      *listError
	DepsErrors []*listError
}

type listError struct {
	ImportStack []string
	Pos         string
	Err         string
}

// parseList reads go list -e -json output: a stream of JSON objects. It
// fails closed: a timeout, truncation, anything that is not a JSON object,
// a non-zero exit, or no package at all makes it inconclusive (an empty
// list would let every later check pass vacuously).
func parseList(out Output) (report.Check, []Package) {
	c := report.Check{Name: CheckList, ExitCode: out.ExitCode, Findings: []report.Finding{}}
	if reason := OutputReason(out); reason != "" {
		c.Status, c.Reasons = report.StatusInconclusive, []string{reason}
		return c, nil
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out.Stdout))
	for {
		var p listPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || p.ImportPath == "" {
			c.Status, c.Reasons = report.StatusInconclusive, []string{"stdout is not go list -json output"}
			return c, nil
		}
		pkgs = append(pkgs, Package{ImportPath: p.ImportPath, Name: p.Name})
		if p.Error != nil {
			c.Findings = append(c.Findings, listFinding(p.ImportPath, p.Error))
		}
		for _, e := range p.DepsErrors {
			c.Findings = append(c.Findings, listFinding(p.ImportPath, e))
		}
	}
	c.Packages = len(pkgs)
	c.Findings = dedupe(c.Findings)
	switch {
	case out.ExitCode != 0:
		// With -e, go list exits non-zero only when it could not load at
		// all (a broken go.mod): the stderr is the finding.
		c.Status = report.StatusFail
		if msg := strings.TrimSpace(string(out.Stderr)); msg != "" {
			c.Findings = append(c.Findings, listFinding("", &listError{Err: msg}))
		} else {
			c.Status, c.Reasons = report.StatusInconclusive, []string{fmt.Sprintf("exit status %d that no finding explains", out.ExitCode)}
		}
	case len(pkgs) == 0:
		c.Status, c.Reasons = report.StatusInconclusive, []string{"go list found no packages: nothing would be checked"}
	case len(c.Findings) > 0:
		c.Status = report.StatusFail
	default:
		c.Status = report.StatusPass
	}
	return c, pkgs
}

// OutputReason returns why out cannot be trusted at all (timed out, killed
// for memory, truncated), or "".
func OutputReason(out Output) string {
	switch {
	case out.TimedOut:
		return "timed out"
	case out.OOMKilled:
		return "killed for using too much memory"
	case out.Truncated:
		return "output truncated"
	}
	return ""
}

// dedupe drops findings with a key already seen, keeping the first, and
// sorts by key so the order does not depend on the toolchain's.
func dedupe(fs []report.Finding) []report.Finding {
	seen := map[string]bool{}
	out := fs[:0]
	for _, f := range fs {
		if seen[f.Key] {
			continue
		}
		seen[f.Key] = true
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
