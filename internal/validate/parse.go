package validate

import (
	"strconv"
	"strings"

	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/testjson"
	"github.com/stockade/stockade/internal/toolchain"
)

// moduleDir is where the module sits in the container; the parsers make
// paths relative to it.
const moduleDir = toolchain.SourceDir

// parser judges one step's output; modPath is the module path, pkgs what
// go list found.
type parser func(out Output, modPath string, pkgs []Package) report.Check

func input(out Output, modPath string, pkgs []Package) testjson.Input {
	in := testjson.Input{
		Stdout: out.Stdout, Stderr: out.Stderr, ExitCode: out.ExitCode,
		TimedOut: out.TimedOut, Truncated: out.Truncated,
		ModulePath: modPath, ModuleDir: moduleDir,
	}
	for _, p := range pkgs {
		in.Packages = append(in.Packages, p.ImportPath)
	}
	return in
}

func parseBuild(out Output, modPath string, pkgs []Package) report.Check {
	return checkOf(out, testjson.ParseBuild(input(out, modPath, pkgs)))
}

func parseVet(out Output, modPath string, pkgs []Package) report.Check {
	return checkOf(out, testjson.ParseVet(input(out, modPath, pkgs)))
}

func parseTest(out Output, modPath string, pkgs []Package) report.Check {
	r := testjson.ParseTest(input(out, modPath, pkgs))
	c := checkOf(out, r)
	var n report.TestCount
	for _, p := range r.Packages {
		if p.Status != "" {
			c.Packages++
		}
		for _, t := range p.Tests {
			switch t.Status {
			case "pass":
				n.Passed++
			case "fail":
				n.Failed++
			case "skip":
				n.Skipped++
			}
		}
	}
	c.Tests = &n
	return c
}

// checkOf converts a testjson verdict into a report check. An OOM kill is
// one more reason the output cannot be trusted.
func checkOf(out Output, r *testjson.Report) report.Check {
	c := report.Check{ExitCode: out.ExitCode, Reasons: r.Reasons, Findings: []report.Finding{}}
	switch r.Status {
	case testjson.Pass:
		c.Status = report.StatusPass
	case testjson.Fail:
		c.Status = report.StatusFail
	default:
		c.Status = report.StatusInconclusive
	}
	if out.OOMKilled {
		c.Status = report.StatusInconclusive
		c.Reasons = append(c.Reasons, "killed for using too much memory")
	}
	if r.Dropped > 0 {
		c.Reasons = append(c.Reasons, strconv.Itoa(r.Dropped)+" more findings were dropped")
	}
	for _, f := range r.Findings {
		c.Findings = append(c.Findings, findingOf(f))
	}
	return c
}

func findingOf(f testjson.Finding) report.Finding {
	f = envKind(f)
	return report.Finding{Key: f.Key, Kind: string(f.Kind), Package: f.Package, Test: f.Test, File: f.File,
		Line: f.Line, Col: f.Col, Message: f.Message, Detail: f.Detail}
}

// listFinding turns one go list error into a build finding keyed like
// testjson's.
func listFinding(pkg string, e *listError) report.Finding {
	f := testjson.Finding{Kind: testjson.KindBuild, Package: pkg}
	msg := e.Err
	if e.Pos != "" {
		f.File, f.Line, f.Col = splitPos(e.Pos)
		// go list repeats the position at the start of the message.
		msg = strings.TrimPrefix(msg, e.Pos+": ")
	}
	f.Message = testjson.Normalize(msg, moduleDir)
	f.Detail = e.Err
	f.Key = testjson.Key(f)
	return findingOf(f)
}

// splitPos splits "dir/file.go:12:5" into the module-relative file, line
// and column; what it cannot read is returned whole as the file.
func splitPos(pos string) (string, int, int) {
	file, line, col := report.SplitPosition(strings.TrimPrefix(pos, moduleDir+"/"))
	if line > 0 {
		file = strings.TrimPrefix(file, "./")
	}
	return file, line, col
}
