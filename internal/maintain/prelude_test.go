package maintain

import (
	"context"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/cacheseed"
	"github.com/stockade/stockade/internal/enginetest"
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

// TestMaintain_TimeRunsOutInThePrelude: when the -deadline ends a step
// of the prelude, the run is validation_inconclusive naming the step and
// the -deadline, as inspect's report is timed out there; never Stockade's
// failure (exit 1): a probe the engine never ends, the data directory's
// lock held by another run, and the scanner's build waiting for that
// lock, each with -lock-timeout longer than what is left.
func TestMaintain_TimeRunsOutInThePrelude(t *testing.T) {
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
			o := Options{Options: workflow.Options{Dir: fixtureRepo(t, "maintain-patch"), FixtureProxy: proxy, DataDir: tc.dataDir,
				LockTimeout: 10 * time.Minute, Owner: enginetest.Owner(t), Deadline: tc.deadline}}
			if tc.vulnDB {
				o.VulnDB = vulndbtest.Write(t, img.GoVersion)
			}
			start := time.Now()
			rep, err := Maintain(context.Background(), tc.eng, o)
			if err != nil {
				t.Fatalf("Maintain = %v after %v; want a report", err, time.Since(start))
			}
			want := "the -deadline (" + tc.deadline.String() + ") ran out during " + tc.step
			if rep.Outcome != ValidationInconclusive || rep.ExitCode != ExitInconclusive || rep.Reason != want {
				t.Errorf("outcome %s (exit %d): %q; want %s: %q", rep.Outcome, rep.ExitCode, rep.Reason, ValidationInconclusive, want)
			}
			if d := time.Since(start); d > tc.deadline+time.Minute {
				t.Errorf("took %v with a -deadline of %v", d, tc.deadline)
			}
			noContainers(t, eng, o.Owner)
		})
	}
	if !hanging.Hung() {
		t.Error("no probe's wait blocked: the deadline ran out before the probe")
	}
}
