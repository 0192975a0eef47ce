package maintain

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/testjson"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
)

// Reruns is how many more times a failing test runs, alone, on each tree.
const Reruns = 3

// rerunArgv runs one test of one package, uncached.
func rerunArgv(pkg, test string) []string {
	return []string{"go", "test", "-mod=readonly", "-json", "-count=1", "-run", runPattern(test), pkg}
}

// runPattern matches exactly test, a top-level test or a subtest
// ("TestTable/#01" gives "^TestTable$/^#01$").
func runPattern(test string) string {
	parts := strings.Split(test, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// rerun runs each test of tests Reruns times, alone, in one fresh execute
// container (validate.StartValidation: its own build cache over seed, its
// own working tree) on the snapshot at src, within d. It
// returns each test's results by finding key ("pass" or "fail"), or why
// a run cannot be trusted (a timeout, truncated output, a test that
// reported nothing).
func rerun(ctx context.Context, r *toolchain.Runner, src string, seed cacheseed.Seed, modPath string, tests []report.Finding, d time.Duration) (map[string][]string, string, error) {
	until := time.Now().Add(d)
	cctx, cancel := context.WithTimeout(ctx, d+validate.HostGrace+toolchain.WorkTreeTimeout)
	defer cancel()
	c, err := validate.StartValidation(cctx, r, src, d, seed)
	if err != nil {
		return nil, "", err
	}
	defer c.Close(context.WithoutCancel(ctx))
	ex := validate.NewExecExecer(c)
	out := map[string][]string{}
	for _, f := range tests {
		for range Reruns {
			left := time.Until(until)
			if left < validate.MinStep {
				return nil, "the reruns' time ran out", nil
			}
			o, err := ex.Exec(cctx, rerunArgv(f.Package, f.Test), left)
			if err != nil {
				return nil, "", fmt.Errorf("maintain: rerun %s: %w", f.Test, err)
			}
			if why := validate.OutputReason(o); why != "" {
				return nil, fmt.Sprintf("rerun of %s %s: %s", f.Package, f.Test, why), nil
			}
			status := testStatus(o, modPath, f.Package, f.Test)
			if status != "pass" && status != "fail" {
				return nil, fmt.Sprintf("rerun of %s %s reported no result", f.Package, f.Test), nil
			}
			out[f.Key] = append(out[f.Key], status)
		}
	}
	return out, "", nil
}

// testStatus is what one rerun said of test: "pass", "fail", or "" when
// the run says nothing of it (a pattern that matched no test).
func testStatus(o validate.Output, modPath, pkg, test string) string {
	r := testjson.ParseTest(testjson.Input{
		Stdout: o.Stdout, Stderr: o.Stderr, ExitCode: o.ExitCode, TimedOut: o.TimedOut, Truncated: o.Truncated,
		ModulePath: modPath, ModuleDir: toolchain.SourceDir, Packages: []string{pkg},
	})
	for _, p := range r.Packages {
		if p.Path != pkg {
			continue
		}
		if p.BuildFailed {
			return "fail"
		}
		for _, t := range p.Tests {
			if t.Name == test && t.Status != "" {
				return t.Status
			}
		}
		// The test started and never ended, or never reported: when its
		// package failed (os.Exit, a crash in the test), the run failed,
		// as the validation judged it.
		if p.Status == "fail" {
			return "fail"
		}
	}
	return ""
}
