package inspect

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/vulndb/vulndbtest"
	"github.com/stockade/stockade/internal/workflow"
)

// TestInspect_TimeRunsOutInThePrelude: when the -deadline ends a step of
// the prelude, inspect's report is inconclusive and names the step and
// the -deadline, as maintain's outcome does; never Stockade's failure: a
// probe the engine never ends, the data directory's lock held by another
// run, and the scanner's build waiting for that lock, each with
// -lock-timeout longer than what is left.
func TestInspect_TimeRunsOutInThePrelude(t *testing.T) {
	eng, proxy, shared := engine(t)
	img, _, err := workflow.SelectImage(context.Background(), eng, workflow.ImageRequest{Directive: "1.24"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Another run holds the lock of a data directory of the test's own.
	held := func() string {
		dir, err := toolchain.PrepareDataDir(t.TempDir())
		var lock *toolchain.Lock
		if err == nil {
			lock, err = toolchain.LockDataDir(context.Background(), dir, 0, "a test holding it", nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lock.Unlock() })
		return dir
	}
	hanging := &enginetest.Hang{Client: eng, Prefix: "stockade-tc-probe-"}
	dir, err := filepath.Abs(filepath.Join(repos, "clean"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		step     string
		eng      workflow.Engine
		dataDir  string
		vulnDB   bool
		deadline time.Duration
	}{
		{"probe", hanging, shared, false, time.Minute},
		{"lock", eng, held(), false, 15 * time.Second},
		{"scanner", eng, held(), true, 15 * time.Second},
	} {
		t.Run(tc.step, func(t *testing.T) {
			o := Options{Options: workflow.Options{Dir: dir, FixtureProxy: proxy, DataDir: tc.dataDir,
				LockTimeout: 10 * time.Minute, Owner: enginetest.Owner(t), Deadline: tc.deadline}}
			if tc.vulnDB {
				o.VulnDB = vulndbtest.Write(t, img.GoVersion)
			}
			start := time.Now()
			rep, err := Inspect(context.Background(), tc.eng, o)
			if err != nil {
				t.Fatalf("Inspect = %v after %v; want a report", err, time.Since(start))
			}
			by := "the -deadline (" + tc.deadline.String() + ")"
			if rep.Verdict != report.Inconclusive || rep.ExitCode != report.ExitFindings || rep.TimedOut != tc.step || rep.TimedOutBy != by {
				t.Errorf("verdict %s (exit %d), timed out in %q by %q; want inconclusive in %s by %s", rep.Verdict, rep.ExitCode, rep.TimedOut, rep.TimedOutBy, tc.step, by)
			}
			if d := time.Since(start); d > tc.deadline+time.Minute {
				t.Errorf("took %v with a -deadline of %v", d, tc.deadline)
			}
			leftovers(t, eng, o.Owner)
		})
	}
	if !hanging.Hung() {
		t.Error("no probe's wait blocked: the deadline ran out before the probe")
	}
}
