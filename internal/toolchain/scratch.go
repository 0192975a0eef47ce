package toolchain

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/lockfile"
)

// scratchPrefix names the scratch directories in the data directory:
// scratch-<random>.
const scratchPrefix = "scratch"

// Scratch is a directory in the data directory for host work done outside
// a run and its lock: the layout check's copy of a checkout's tree,
// maintain's empty git home, a fixture proxy generated from module
// sources. Nothing of it is left in $TMPDIR. A lock of its own, as a
// run's (RunLockFile, released by the kernel when the process dies), marks
// it in use: Close removes it, and the next Open or ReapRuns on the data
// directory removes one whose process died.
type Scratch struct {
	// Dir is the directory to work in, empty when made, mode 0700.
	Dir  string
	root string
	lock *lockfile.Lock // RunLockFile in root, held while in use
}

// NewScratch makes a scratch directory in dataDir, which is prepared as
// Open prepares it (PrepareDataDir; with defaultDir, PrepareDefaultDataDir).
func NewScratch(dataDir string, defaultDir bool) (*Scratch, error) {
	prepare := PrepareDataDir
	if defaultDir {
		prepare = PrepareDefaultDataDir
	}
	dir, err := prepare(dataDir)
	if err != nil {
		return nil, err
	}
	root, err := container.MkdirFresh(dir, scratchPrefix, 0o700)
	if err != nil {
		return nil, fmt.Errorf("toolchain: scratch: %w", err)
	}
	lock, err := lockfile.TryAcquire(filepath.Join(root, RunLockFile), "scratch")
	if err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("toolchain: scratch: %w", err)
	}
	s := &Scratch{Dir: filepath.Join(root, "work"), root: root, lock: lock}
	if err := os.Mkdir(s.Dir, 0o700); err != nil {
		s.Close()
		return nil, fmt.Errorf("toolchain: scratch: %w", err)
	}
	return s, nil
}

// Close removes the scratch directory and releases its lock. It is safe
// to call more than once, and on nil.
func (s *Scratch) Close() error {
	if s == nil || s.root == "" {
		return nil
	}
	err := removeHost(s.root)
	s.lock.Unlock()
	s.root = ""
	if err != nil {
		return fmt.Errorf("toolchain: scratch: %w", err)
	}
	return nil
}
