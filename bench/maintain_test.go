package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/inspect"
	"github.com/stockade/stockade/internal/maintain"
	"github.com/stockade/stockade/internal/workflow"
)

// maintainCase is a fixture maintain runs on, and whether with -each.
type maintainCase struct {
	fixture string
	each    bool
}

// maintainCases: one safe patch upgrade (a proposal), and -each over the
// fixture with three candidates of mixed outcomes.
var maintainCases = []maintainCase{{"maintain-patch", false}, {"maintain-each", true}}

// maintain measures a whole maintain run against what it must at least do:
// the validations it runs, each measured as a whole inspect of the same
// tree (snapshot, acquisition, validation with a fresh seeded cache, and
// candidate listing) in the same round. The baseline for one candidate is
// inspect of the committed tree plus inspect of the proposed tree; for
// -each over N tried candidates, N+1 inspects of the committed tree.
func (s *suite) maintain(tb *table, rounds int) {
	ctx := context.Background()
	dataDir := filepath.Join(s.dataDir, "inspect") // shares inspect's seed
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	proxy := s.tcfg.FixtureProxy
	inspect := func(dir string) time.Duration {
		t0 := time.Now()
		if _, err := inspect.Inspect(ctx, s.eng, inspect.Options{Options: workflow.Options{Dir: dir, FixtureProxy: proxy, DataDir: dataDir, Owner: s.tcfg.Owner, LockTimeout: 10 * time.Minute}}); err != nil {
			s.t.Fatalf("inspect %s: %v", dir, err)
		}
		return time.Since(t0)
	}
	type sample struct{ m, base []time.Duration }
	res := map[string]*sample{}
	tried := map[string]int{}
	// Round 0 is untimed: it makes the seed, the module cache entries and
	// the image choice of every later round.
	for r := 0; r <= rounds; r++ {
		for _, c := range maintainCases {
			repo := s.gitFixture(c.fixture)
			t0 := time.Now()
			rep, err := maintain.Maintain(ctx, s.eng, maintain.Options{Options: workflow.Options{Dir: repo, FixtureProxy: proxy, DataDir: dataDir, Owner: s.tcfg.Owner, LockTimeout: 10 * time.Minute}, Each: c.each})
			took := time.Since(t0)
			if err != nil {
				s.t.Fatalf("maintain %s: %v", c.fixture, err)
			}
			if len(rep.Attempts) == 0 {
				s.t.Fatalf("maintain %s: %s (%s): no attempt to measure", c.fixture, rep.Outcome, rep.Reason)
			}
			base := inspect(repo)
			var total time.Duration
			if c.each {
				total = base * time.Duration(len(rep.Attempts)+1)
			} else {
				p := rep.Attempts[0].Proposal
				if p == nil {
					s.t.Fatalf("maintain %s: %s; want a proposal", c.fixture, rep.Outcome)
				}
				total = base + inspect(s.checkoutCopy(repo, p.Commit))
			}
			if r == 0 {
				continue
			}
			x := res[c.fixture]
			if x == nil {
				x = &sample{}
				res[c.fixture] = x
			}
			x.m, x.base = append(x.m, took), append(x.base, total)
			tried[c.fixture] = len(rep.Attempts)
		}
	}
	tb.section("maintain vs the inspects of the trees it validates, same round: median wall time (targets: one candidate at most 1.5×; -each over N at most 1.2× of N+1)",
		"fixture", "maintain", "inspects", "maintain/inspects")
	for _, c := range maintainCases {
		name := c.fixture
		if c.each {
			name += fmt.Sprintf(" -each (%d tried)", tried[c.fixture])
		}
		m, b := median(res[c.fixture].m), median(res[c.fixture].base)
		tb.row(name, secs(m), secs(b), ratio(m, b))
	}
}

// gitFixture copies testdata/repos/<name> into a new git repository with
// one commit, as a user's checkout, and returns its directory.
func (s *suite) gitFixture(name string) string {
	top := s.tempDir("repo-")
	s.t.Cleanup(func() { s.removeTree(top) })
	dir := filepath.Join(top, name)
	copyTree(s.t, repoPath(s.t, "testdata/repos/"+name), dir)
	s.git(dir, "init", "-q", "-b", "main")
	s.git(dir, "add", "-A")
	s.git(dir, "commit", "-q", "-m", "fixture "+name)
	return dir
}

// checkoutCopy writes the tree of commit in repo to a new directory.
func (s *suite) checkoutCopy(repo, commit string) string {
	dir := s.tempDir("proposed-")
	s.t.Cleanup(func() { s.removeTree(dir) })
	s.git(repo, "--work-tree="+dir, "checkout", "-q", commit, "--", ".")
	s.git(repo, "reset", "-q") // the checkout staged the proposal's files
	return dir
}

func (s *suite) git(dir string, args ...string) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=Bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
