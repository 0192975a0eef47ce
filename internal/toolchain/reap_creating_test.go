package toolchain

import (
	"context"
	"fmt"
	"testing"

	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// creatingEngine is an engine that lists one toolchain container of a data
// directory while it is still creating it: removals answer not found
// until creating reaches zero, as the engine does for a create that a
// killed run had in flight.
type creatingEngine struct {
	c        dockerapi.ContainerSummary
	creating int   // removals still answered with not found
	answer   error // what those removals answer; nil means not found
	removed  bool  // the container is gone
}

func (e *creatingEngine) ContainerList(ctx context.Context, opts dockerapi.ListOptions) ([]dockerapi.ContainerSummary, error) {
	// The engine's "id" filter does not match a container being created.
	if e.removed || len(opts.Filters["id"]) > 0 && e.creating > 0 {
		return nil, nil
	}
	return []dockerapi.ContainerSummary{e.c}, nil
}

func (e *creatingEngine) ContainerRemove(ctx context.Context, id string, opts dockerapi.RemoveOptions) error {
	if e.removed || id != e.c.ID {
		return dockerapi.ErrNotFound
	}
	if e.creating > 0 {
		e.creating--
		if e.answer != nil {
			return e.answer
		}
		return dockerapi.ErrNotFound
	}
	e.removed = true
	return nil
}

func (e *creatingEngine) NetworkList(context.Context, dockerapi.Filters) ([]dockerapi.Network, error) {
	return nil, nil
}

func (e *creatingEngine) NetworkRemove(context.Context, string) error { return dockerapi.ErrNotFound }

// TestReap_WaitsForContainerBeingCreated: a container the engine lists but
// cannot remove yet (not found: still being created) is removed once it
// can be, not skipped as gone.
func TestReap_WaitsForContainerBeingCreated(t *testing.T) {
	dir := t.TempDir()
	l := label.Base(DefaultOwner, label.KindToolchain)
	l[label.Run], l[label.DataDir] = "crashed", DataDirID(dir)
	eng := &creatingEngine{c: dockerapi.ContainerSummary{ID: "c1", Names: []string{"/stockade-tc-x"}, Labels: l}, creating: 3}
	n, err := Reap(context.Background(), eng, dir)
	if err != nil || n != 1 || !eng.removed {
		t.Errorf("Reap = %d, %v (removed: %v); want the container removed once the engine can", n, err, eng.removed)
	}
}

// TestReap_WaitsForRemovalInProgress: a container whose removal another
// request started (the engine answers 409 until it is done) counts as
// removed once it is no longer listed, not as a failure.
func TestReap_WaitsForRemovalInProgress(t *testing.T) {
	dir := t.TempDir()
	l := label.Base(DefaultOwner, label.KindToolchain)
	l[label.Run], l[label.DataDir] = "crashed", DataDirID(dir)
	eng := &creatingEngine{c: dockerapi.ContainerSummary{ID: "c1", Names: []string{"/stockade-tc-x"}, Labels: l}, creating: 2,
		answer: fmt.Errorf("removal of container c1 is already in progress: %w", dockerapi.ErrConflict)}
	if _, err := Reap(context.Background(), eng, dir); err != nil || !eng.removed {
		t.Errorf("Reap = %v (removed: %v); want the container removed once the engine is done", err, eng.removed)
	}
}
