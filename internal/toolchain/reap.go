package toolchain

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/egress"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// reapBudget bounds each engine call of a reap.
const reapBudget = 30 * time.Second

// Reaper is what Reap needs from the engine; *dockerapi.Client implements it.
type Reaper interface {
	ContainerList(ctx context.Context, opts dockerapi.ListOptions) ([]dockerapi.ContainerSummary, error)
	ContainerRemove(ctx context.Context, id string, opts dockerapi.RemoveOptions) error
	NetworkList(ctx context.Context, filters dockerapi.Filters) ([]dockerapi.Network, error)
	NetworkRemove(ctx context.Context, id string) error
}

// Reap force-removes every container a crashed toolchain run on dataDir
// left behind: those labelled label.Managed, label.Kind=toolchain and
// label.DataDir=DataDirID(dataDir) whose run (label.Run) is not live (its
// run directory's RunLockFile is not held: the run crashed, or ended
// without its cleanup), their egress gates among them, and then those
// runs' gate networks. A live run's, on this data directory or any other,
// are never touched, nor is anything else. Call it with the data
// directory's lock held (Open does), so a run starting meanwhile is
// ordered against it. It returns how many containers it removed. dataDir
// must be spelled as PrepareDataDir returns it, so the ID matches the one
// Open used.
func Reap(ctx context.Context, eng Reaper, dataDir string) (int, error) {
	dataDir = filepath.Clean(dataDir)
	id := DataDirID(dataDir)
	want := map[string]string{label.Managed: label.ManagedValue, label.Kind: label.KindToolchain, label.DataDir: id}
	lctx, cancel := context.WithTimeout(ctx, reapBudget)
	defer cancel()
	cs, err := eng.ContainerList(lctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(want)})
	if err != nil {
		return 0, fmt.Errorf("toolchain: list containers to reap: %w", err)
	}
	ns, err := eng.NetworkList(lctx, dockerapi.LabelsFilter(want))
	if err != nil {
		return 0, fmt.Errorf("toolchain: list networks to reap: %w", err)
	}
	runs := map[string]bool{}
	for _, c := range cs {
		if label.Has(c.Labels, want) {
			runs[c.Labels[label.Run]] = true
		}
	}
	for _, n := range ns {
		if label.Has(n.Labels, want) {
			runs[n.Labels[label.Run]] = true
		}
	}
	n := 0
	var errs []error
	for run := range runs {
		if run == "" {
			continue // every toolchain object names its run
		}
		switch live, err := runLive(dataDir, run); {
		case err != nil:
			errs = append(errs, err)
			continue
		case live:
			continue
		}
		m, err := reap(ctx, eng, id, run)
		n += m
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// reap removes the toolchain containers of dataDirID, and only of runID
// when it is not empty.
func reap(ctx context.Context, eng Reaper, dataDirID, runID string) (int, error) {
	if dataDirID == "" {
		return 0, errors.New("toolchain: reap needs a data directory")
	}
	want := map[string]string{label.Managed: label.ManagedValue, label.Kind: label.KindToolchain, label.DataDir: dataDirID}
	if runID != "" {
		want[label.Run] = runID
	}
	lctx, cancel := context.WithTimeout(ctx, reapBudget)
	list, err := eng.ContainerList(lctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(want)})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("toolchain: list containers to reap: %w", err)
	}
	n := 0
	var errs []error
	for _, c := range list {
		// The engine filtered; check again so a filter bug cannot widen
		// what we remove.
		if !label.Has(c.Labels, want) {
			continue
		}
		removed, err := removeListed(ctx, eng, c.ID, want)
		if removed {
			n++
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("toolchain: reap %s: %w", c.ID, err))
		}
	}
	// The gates' networks, once their containers are gone.
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reapBudget)
	defer cancel()
	if _, err := egress.RemoveNetworks(nctx, eng, want); err != nil {
		errs = append(errs, fmt.Errorf("toolchain: reap: %w", err))
	}
	return n, errors.Join(errs...)
}

// reapRetry is how often removeListed tries again.
const reapRetry = 50 * time.Millisecond

// removeListed force-removes a container the engine listed with labels
// want, within reapBudget. The engine lists a container it is still
// creating before it can remove it, and answers not found meanwhile: a
// create that a killed run had in flight completes after the kill. So not
// found counts as gone only once the container is no longer listed (by
// label: an "id" filter does not match it yet); until then removal is
// tried again. So does a conflict, which is the engine still removing it
// for someone else (a killed run's last request). removed reports whether this call removed it.
func removeListed(ctx context.Context, eng Reaper, id string, want map[string]string) (removed bool, err error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reapBudget)
	defer cancel()
	for {
		err := eng.ContainerRemove(rctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true})
		// A conflict is a removal already in progress (a killed run's
		// last request): it is gone once no longer listed.
		if !errors.Is(err, dockerapi.ErrNotFound) && !errors.Is(err, dockerapi.ErrConflict) {
			return err == nil, err
		}
		list, err := eng.ContainerList(rctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(want)})
		if err != nil {
			return false, err
		}
		if !slices.ContainsFunc(list, func(c dockerapi.ContainerSummary) bool { return c.ID == id }) {
			return false, nil
		}
		select {
		case <-rctx.Done():
			return false, fmt.Errorf("listed but not removable within %v: %w", reapBudget, rctx.Err())
		case <-time.After(reapRetry):
		}
	}
}

// ErrNotLocked reports a ReapRuns without the data directory's lock held:
// a live run's directory could be among those removed.
var ErrNotLocked = errors.New("toolchain: the data directory's lock is not held")

// ReapRuns removes the run directories (run-*) that crashed runs left in
// the data directory whose lock is held (lock, from LockDataDir, so no run
// starts meanwhile); a live run's (its RunLockFile held) stays. The directory must carry the marker
// (PrepareDataDir); nothing but its run-* directories is touched. What the
// host user cannot remove (the container user's files, on native Linux
// as a non-root user) is removed through a container of image; with image
// empty such a directory is an error. It returns how many it removed.
func ReapRuns(ctx context.Context, eng Engine, lock *Lock, image string) (int, error) {
	if !lock.held() {
		return 0, ErrNotLocked
	}
	dir := lock.dir
	if ok, err := isMarked(dir); err != nil {
		return 0, err
	} else if !ok {
		return 0, &notDataDir{dir: dir, entry: "(no marker)"}
	}
	r := &Runner{
		eng: eng, dataDir: dir, log: slog.New(slog.DiscardHandler),
		cfg: Config{Image: image, Owner: DefaultOwner, RunID: "reap-" + container.RandomHex(6), DataDirID: DataDirID(dir)},
	}
	return r.removeStaleRuns(ctx)
}

// removeAll removes dir. What the host user cannot remove (the container
// user's files, on native Linux as a non-root user) is removed by a
// container running as the container user with dir mounted, after which the
// host removes the rest.
func (r *Runner) removeAll(ctx context.Context, dir string) error {
	err := removeHost(dir)
	if err == nil {
		return nil
	}
	if r.cfg.Image == "" {
		return fmt.Errorf("toolchain: remove %s: %w (no image to remove it through a container)", dir, err)
	}
	r.log.Info("removing through a container", "dir", dir, "err", err)
	if cerr := r.removeInContainer(ctx, writableDirs(dir)); cerr != nil {
		return fmt.Errorf("toolchain: remove %s: %w (on the host: %v)", dir, cerr, err)
	}
	if err := removeHost(dir); err != nil {
		return fmt.Errorf("toolchain: remove %s after the cleanup container: %w", dir, err)
	}
	return nil
}

// removeHost makes what it owns writable (the module cache is read-only by
// design) and removes dir.
func removeHost(dir string) error {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700) // fails harmlessly on what is not ours
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// writableDirs returns the directories under dir the container user can
// write into: dir itself if it is world-writable, else its world-writable
// children (the caches and staging directories of a run directory).
func writableDirs(dir string) []string {
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && fi.Mode().Perm()&0o007 == 0o007 {
		return []string{dir}
	}
	var out []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		fi, err := e.Info()
		if err == nil && e.IsDir() && fi.Mode().Perm()&0o007 == 0o007 {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// cleanupScript makes every directory below the mounts that the container
// user owns writable, then removes everything it can; what belongs to the
// host user is left for the host.
const cleanupScript = `find /cleanup -mindepth 2 -type d -exec chmod u+rwx {} + 2>/dev/null
find /cleanup -mindepth 2 -depth -exec rm -rf {} + 2>/dev/null
exit 0`

// cleanupTimeout bounds the cleanup container's command.
const cleanupTimeout = 5 * time.Minute

// removeInContainer empties dirs from inside a container running as the
// container user: it makes every directory it owns writable, then removes
// every entry it may. The container runs no repository code; it mounts dirs
// only, with no network.
func (r *Runner) removeInContainer(ctx context.Context, dirs []string) error {
	if len(dirs) == 0 {
		return errors.New("nothing the container user could remove")
	}
	const target = "/cleanup"
	spec, err := container.ToolchainSpec(scopeOf(r.cfg), container.PurposeCleanup, r.cfg.Image, cleanupTimeout, []string{"sh", "-c", cleanupScript})
	if err != nil {
		return err
	}
	spec.Env = map[string]string{"PATH": image.GoPath, "HOME": TmpDir}
	for i, d := range dirs {
		spec.Mounts = append(spec.Mounts, container.Mount{Type: container.Bind, Source: d, Target: fmt.Sprintf("%s/%d", target, i), Writable: true})
	}
	o := r.runOptions("cleanup", cleanupTimeout)
	o.OutputCap = 64 << 10
	res, err := container.Run(ctx, r.eng, spec, o)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("cleanup container exited %d: %s", res.ExitCode, res.Stderr)
	}
	return nil
}
