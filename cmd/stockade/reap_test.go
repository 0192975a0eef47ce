package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// TestReap_RemovesOrphansOfItsDataDirOnly leaves two toolchain containers
// and two run directories behind, as a crashed run would, one of each for
// the data directory reaped and one for another: stockade reap removes the
// first and not the second.
func TestReap_RemovesOrphansOfItsDataDirOnly(t *testing.T) {
	eng := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img := enginetest.BaseImage(t, eng)
	mine, err := toolchain.PrepareDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := toolchain.PrepareDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	orphan := func(dataDir string) string {
		l := label.Base(enginetest.Owner(t), label.KindToolchain)
		l[label.Run], l[label.DataDir] = "crashed", toolchain.DataDirID(dataDir)
		cfg, err := container.Spec{Image: img, Cmd: []string{"true"}, Labels: l}.Config()
		if err != nil {
			t.Fatal(err)
		}
		id, err := eng.ContainerCreate(ctx, container.RandomName("reaptest"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.ContainerRemove(context.Background(), id, dockerapi.RemoveOptions{Force: true}) })
		return id
	}
	gone, kept := orphan(mine), orphan(other)
	// A crashed run also leaves its run directory behind.
	for _, d := range []string{mine, other} {
		if err := os.MkdirAll(filepath.Join(d, "run-crashed", "modcache"), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"reap", "-data-dir", mine}, &stdout, &stderr); code != exitOK {
		t.Fatalf("stockade reap = exit %d\nstderr: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "reaped 1 container") {
		t.Errorf("stockade reap printed %q; want one container reaped", stdout.String())
	}
	if _, err := eng.ContainerInspect(ctx, gone); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("orphan of the reaped data directory is still there: %v", err)
	}
	if _, err := eng.ContainerInspect(ctx, kept); err != nil {
		t.Errorf("another data directory's container was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mine, "run-crashed")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the crashed run's directory is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other, "run-crashed")); err != nil {
		t.Errorf("another data directory's run directory was removed: %v", err)
	}
	if !strings.Contains(stdout.String(), "removed 1 run directory") {
		t.Errorf("stockade reap printed %q; want one run directory removed", stdout.String())
	}
}
