package maintain

import (
	"context"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/inspect"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/vulndb/vulndbtest"
	"github.com/stockade/stockade/internal/workflow"
)

// lockedDataDir is a new data directory whose lock the test holds, as
// another run starting would.
func lockedDataDir(t *testing.T) string {
	t.Helper()
	dir, err := toolchain.PrepareDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lock, err := toolchain.LockDataDir(context.Background(), dir, 0, "a test holding it", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Unlock() })
	return dir
}

// TestTimeRunsOutInThePrelude_InspectAndMaintain: when the -deadline
// ends a step of the prelude the workflows share, inspect's report is
// inconclusive and names the step and the -deadline (timed_out,
// timed_out_by), and maintain's run is validation_inconclusive saying the
// same; neither is Stockade's failure (exit 1): a probe the engine never
// ends, the data directory's lock held by another run, and the scanner's
// build waiting for that lock, each with -lock-timeout longer than what
// is left. (Maintain returned the failure before the prelude was one.)
func TestTimeRunsOutInThePrelude_InspectAndMaintain(t *testing.T) {
	eng, proxy, shared := engine(t)
	img, _, err := workflow.SelectImage(context.Background(), eng, workflow.ImageRequest{Directive: "1.24"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The seed exists, so the steps before the probe take seconds.
	dir, err := toolchain.PrepareDefaultDataDir(shared)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if _, err := cacheseed.Ensure(sctx, eng, cacheseed.Config{DataDir: dir, Image: img.ID, GoVersion: img.GoVersion, Settings: validate.SeedSettings, Owner: enginetest.Owner(t)}); err != nil {
		t.Fatal(err)
	}
	hanging := &enginetest.Hang{Client: eng, Prefix: "stockade-tc-probe-"}
	for _, tc := range []struct {
		step     string
		eng      workflow.Engine
		dataDir  string
		vulnDB   bool
		deadline time.Duration
	}{
		{"probe", hanging, shared, false, time.Minute},
		{"lock", eng, lockedDataDir(t), false, 15 * time.Second},
		{"scanner", eng, lockedDataDir(t), true, 15 * time.Second},
	} {
		t.Run(tc.step, func(t *testing.T) {
			o := workflow.Options{Dir: fixtureRepo(t, "maintain-patch"), FixtureProxy: proxy, DataDir: tc.dataDir,
				LockTimeout: 10 * time.Minute, Owner: enginetest.Owner(t), Deadline: tc.deadline}
			if tc.vulnDB {
				o.VulnDB = vulndbtest.Write(t, img.GoVersion)
			}
			by := "the -deadline (" + tc.deadline.String() + ")"
			start := time.Now()
			rep, err := inspect.Inspect(context.Background(), tc.eng, inspect.Options{Options: o})
			switch {
			case err != nil:
				t.Errorf("Inspect = %v after %v; want a report", err, time.Since(start))
			case rep.Verdict != report.Inconclusive || rep.ExitCode != report.ExitFindings || rep.TimedOut != tc.step || rep.TimedOutBy != by:
				t.Errorf("inspect: verdict %s (exit %d), timed out in %q by %q; want inconclusive in %s by %s", rep.Verdict, rep.ExitCode, rep.TimedOut, rep.TimedOutBy, tc.step, by)
			}
			start = time.Now()
			mrep, err := Maintain(context.Background(), tc.eng, Options{Options: o})
			switch want := by + " ran out during " + tc.step; {
			case err != nil:
				t.Errorf("Maintain = %v after %v; want a report", err, time.Since(start))
			case mrep.Outcome != ValidationInconclusive || mrep.ExitCode != ExitInconclusive || mrep.Reason != want:
				t.Errorf("maintain: outcome %s (exit %d): %q; want %s: %q", mrep.Outcome, mrep.ExitCode, mrep.Reason, ValidationInconclusive, want)
			}
			if d := time.Since(start); d > tc.deadline+time.Minute {
				t.Errorf("maintain took %v with a -deadline of %v", d, tc.deadline)
			}
			noContainers(t, eng, o.Owner)
		})
	}
	if !hanging.Hung() {
		t.Error("no probe's wait blocked: the deadline ran out before the probe")
	}
}
