package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
)

// Check checks, on the host and without an engine, the layout of the tree
// of dir a workflow works on: for a directory in a git checkout (its top,
// or below it: a module of a monorepo) its committed tree (with worktree,
// the files git would commit from the working tree), so an ignored
// node_modules or .venv symlink refuses nothing, and a submodule below it
// is refused; for any other directory the directory. A checkout's tree is
// copied into a scratch directory of the data directory dataDir (empty:
// DefaultDataDir()) for the check and removed after (toolchain.Scratch).
// The go directive must be one of the releases the host and dataDir have
// (releases).
//
// It returns go.mod's facts (when it parses), which tree that is, and the
// refusal: an unsupported layout, a go directive no image can build, or a
// go.mod that does not parse (report.RefusalMalformedGoMod); nil when the
// tree may be worked on. err is an input that cannot be read
// (toolchain.ErrSnapshot) or Stockade's failure.
func Check(ctx context.Context, dir string, worktree bool, dataDir string) (*gomod.Module, *report.Source, *report.Refusal, error) {
	m, src, err := checkTree(ctx, dir, worktree, dataDir)
	if ref := refusalOf(err); ref != nil {
		return m, src, ref, nil
	}
	return m, src, nil, err
}

func checkTree(ctx context.Context, dir string, worktree bool, dataDir string) (*gomod.Module, *report.Source, error) {
	if _, _, git := toolchain.GitWorkTree(ctx, dir); !git {
		m, _, err := gomod.Check(dir, releases(ctx, dataDir), nil)
		return m, &report.Source{Kind: "directory"}, err
	}
	dataDir, defaultDir, err := DataDir(dataDir)
	if err != nil {
		return nil, nil, err
	}
	tmp, err := toolchain.NewScratch(dataDir, defaultDir)
	if err != nil {
		return nil, nil, err
	}
	defer tmp.Close()
	snap, err := toolchain.SnapshotTo(ctx, dir, tmp.Dir, toolchain.SnapshotOptions{Worktree: worktree})
	if errors.Is(err, toolchain.ErrTooLarge) {
		return nil, nil, &gomod.UnsupportedError{Reason: gomod.ReasonTooLarge, Path: ".", Err: err}
	}
	if err != nil {
		return nil, nil, err
	}
	m, err := checkModule(ctx, snap, dataDir)
	return m, sourceOf(snap), err
}

// checkModule checks the module of a snapshot: its go.mod, its layout and
// that it has no submodule, whose content is not in the repository (what
// would run is not what a clone with submodules has).
func checkModule(ctx context.Context, snap toolchain.Snapshot, dataDir string) (*gomod.Module, error) {
	m, _, err := gomod.Check(snap.Dir, releases(ctx, dataDir), nil)
	if err == nil && len(snap.Submodules) > 0 {
		err = &gomod.UnsupportedError{Reason: gomod.ReasonSubmodule, Path: snap.Submodules[0]}
	}
	return m, err
}

// checkSnapshot checks the snapshot that runs, which may differ from the
// tree Check read before it was taken, and that its go directive is still
// directive (the image was chosen for it).
func checkSnapshot(ctx context.Context, snap toolchain.Snapshot, directive, dataDir string) (*gomod.Module, *report.Refusal, error) {
	m, err := checkModule(ctx, snap, dataDir)
	if ref := refusalOf(err); ref != nil {
		return m, ref, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if m.Go != directive {
		return nil, nil, fmt.Errorf("workflow: the go directive of the validated tree (%q) changed while the run started (%q)", m.Go, directive)
	}
	return m, nil, nil
}

// refusalOf is the refusal a gomod.Check or image selection error says,
// or nil when err is none.
func refusalOf(err error) *report.Refusal {
	var ue *gomod.UnsupportedError
	var me *gomod.MalformedError
	var tn *imagetable.TooNewError
	switch {
	case errors.As(err, &tn):
		return &report.Refusal{Kind: "requires_newer_toolchain", Reason: tn.Error()}
	case errors.As(err, &ue):
		return &report.Refusal{Kind: string(ue.Reason), Reason: refusalText(ue)}
	case errors.As(err, &me):
		return &report.Refusal{Kind: report.RefusalMalformedGoMod, Reason: me.Error()}
	case errors.Is(err, gomod.ErrNoModule):
		return &report.Refusal{Kind: "no_module", Reason: "no go.mod at the top of the directory"}
	}
	return nil
}

// refusalText says why a layout is refused, in one sentence.
func refusalText(e *gomod.UnsupportedError) string {
	what := map[gomod.Reason]string{
		gomod.ReasonWorkspace:     "go.work workspaces are not supported yet",
		gomod.ReasonVendor:        "vendored modules are not supported yet",
		gomod.ReasonNestedModule:  "nested modules are not supported yet",
		gomod.ReasonLocalReplace:  "replace directives with a local directory target are not supported yet",
		gomod.ReasonSubmodule:     "git submodules are not supported yet",
		gomod.ReasonSymlinkEscape: "a symlink leaves the repository",
		gomod.ReasonIrregularFile: "the repository holds a device, pipe or socket",
		gomod.ReasonTooLarge:      "the repository is too large",
		gomod.ReasonGoVersion:     "no toolchain image can build this go directive",
	}[e.Reason]
	if what == "" {
		what = "unsupported layout " + string(e.Reason)
	}
	s := what + " (" + e.Path
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	s += ")"
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// sourceOf says which tree a snapshot holds, for the report.
func sourceOf(s toolchain.Snapshot) *report.Source {
	switch {
	case s.Git && s.Worktree:
		return &report.Source{Kind: "worktree", Commit: s.Commit, Subdir: s.Subdir}
	case s.Git:
		return &report.Source{Kind: "commit", Commit: s.Commit, Subdir: s.Subdir, Uncommitted: s.Uncommitted}
	}
	return &report.Source{Kind: "directory"}
}
