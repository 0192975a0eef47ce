package maintain

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/workflow"
)

// TestMaintain_Monorepo: a module in a subdirectory of a repository is
// maintained as one at the top: its committed tree is the baseline, the
// proposal commit changes its go.mod and go.sum and nothing else, and an
// uncommitted change elsewhere in the repository does not count.
func TestMaintain_Monorepo(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	top := filepath.Join(t.TempDir(), "mono")
	for dst, src := range map[string]string{"services/app": "maintain-patch", "tools": "maintain-current"} {
		if err := os.CopyFS(filepath.Join(top, dst), os.DirFS(filepath.Join("..", "..", "testdata", "repos", src))); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(top, "README"), []byte("two modules\n"), 0o644)
	gitT(t, top, nil, "init", "-q", "-b", "main")
	gitT(t, top, nil, "add", "-A")
	gitT(t, top, []string{"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z"}, "commit", "-q", "-m", "monorepo")
	os.WriteFile(filepath.Join(top, "README"), []byte("changed, not committed\n"), 0o644)
	app := filepath.Join(top, "services", "app")
	owner := enginetest.Owner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rep, err := Maintain(ctx, eng, Options{Options: workflow.Options{Dir: app, FixtureProxy: proxy, DataDir: dataDir, LockTimeout: 10 * time.Minute, Owner: owner, Timeout: 5 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != ProposalPrepared || rep.Source == nil || rep.Source.Subdir != "services/app" {
		var b strings.Builder
		WriteText(&b, rep)
		t.Fatalf("outcome %s, source %+v; want a proposal for services/app\n%s", rep.Outcome, rep.Source, b.String())
	}
	p := rep.Attempts[0].Proposal
	changed := strings.Fields(gitT(t, top, nil, "diff", "--name-only", "HEAD", p.Ref))
	if strings.Join(changed, " ") != "services/app/go.mod services/app/go.sum" {
		t.Errorf("the proposal changes %q; want the module's go.mod and go.sum only", changed)
	}
	if got := gitT(t, top, nil, "show", p.Ref+":services/app/go.mod"); !strings.Contains(got, "stockade.test/greet v1.0.1") {
		t.Errorf("the proposal's go.mod:\n%s\nwant greet v1.0.1", got)
	}
	if tree := strings.TrimSpace(gitT(t, top, nil, "rev-parse", p.Ref+"^{tree}")); rep.Attempts[0].Evidence.Tree != tree {
		t.Errorf("evidence tree %s; the proposal's is %s", rep.Attempts[0].Evidence.Tree, tree)
	}
	noContainers(t, eng, owner)
}
