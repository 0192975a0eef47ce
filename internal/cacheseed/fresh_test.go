package cacheseed

import (
	"fmt"
	"path/filepath"

	"github.com/stockade/stockade/internal/container"
)

// Fresh is one validation's build cache in the tests: a new, randomly named, empty
// directory that the go command fills, reading the seed (if any) through
// GOCACHEPROG. Build, vet and test of one validation share it; nothing else
// ever mounts it.
type Fresh struct {
	// Dir is the host directory, mode 0777 so the container user can write
	// it. The caller removes it at the end of the run (through a container
	// when the host user cannot remove what the container user wrote).
	Dir string
	// Seed is the seed the cache starts from; the zero Seed for none.
	Seed Seed
}

// NewFresh creates a fresh cache directory parent/cache-<random> for one
// validation starting from seed (the zero Seed gives a plain empty cache),
// made exactly as a Runner makes a validation's (container.MkdirFresh, mode
// 0777). Validations get theirs from toolchain.Runner.NewBuildCache; the
// tests that run without a Runner use this. parent must exist.
func NewFresh(seed Seed, parent string) (Fresh, error) {
	if !filepath.IsAbs(parent) {
		return Fresh{}, fmt.Errorf("cacheseed: cache parent %q is not absolute", parent)
	}
	dir, err := container.MkdirFresh(parent, "cache", 0o777)
	if err != nil {
		return Fresh{}, fmt.Errorf("cacheseed: %w", err)
	}
	return Fresh{Dir: dir, Seed: seed}, nil
}

// Mounts returns the mounts a validation container needs: Dir writable at
// gocache (an absolute path in the container) and the seed read-only at
// SeedTarget.
func (f Fresh) Mounts(gocache string) []container.Mount {
	m := []container.Mount{{Type: container.Bind, Source: f.Dir, Target: gocache, Writable: true}}
	return append(m, f.Seed.Mounts()...)
}

// Env returns GOCACHE=gocache and, with a seed, its GOCACHEPROG.
func (f Fresh) Env(gocache string) map[string]string {
	env := map[string]string{"GOCACHE": gocache}
	for k, v := range f.Seed.Env() {
		env[k] = v
	}
	return env
}
