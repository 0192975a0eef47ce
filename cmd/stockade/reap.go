package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/workflow"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

func init() {
	register(&command{
		name:    "reap",
		summary: "remove containers a crashed run left behind",
		usage: `usage: stockade reap [flags]

Reap force-removes every toolchain container that a crashed run on the
data directory left behind, as each run does when it starts: containers
labelled as Stockade's toolchain containers for that data directory whose
run is not live (their egress gates among them), and those runs' gate
networks. Then it removes the run directories (run-*) crashed runs left in
the data directory. A run holds a lock of its own in its run directory for
as long as it lives, so a live run's containers and directory are never
among them: reap can run while other runs go on. It takes the data
directory's lock first (held briefly by a run while it starts), waiting up
to -lock-timeout. Last, it removes the copies of
toolchain images' GOROOT (volumes of about 250 MB each, shared by every
run on the engine) whose image is gone or superseded: one of Stockade's
toolchain images left without a tag by a newer build, which it removes too
when no container uses it. Nothing else is touched: no other container,
image, volume or network, nothing in use, and nothing in a directory that
does not carry Stockade's data directory marker.

It prints how many containers, run directories and GOROOT volumes it
removed.

Examples:

	stockade reap
	stockade reap -data-dir /var/tmp/stockade -lock-timeout 5m`,
		flags: reapFlags,
	})
}

func reapFlags(fs *flag.FlagSet) func(ctx context.Context, env *cmdEnv, args []string) error {
	var (
		dataDir     = fs.String("data-dir", "", "`DIR` whose runs' containers to reap; default $XDG_CACHE_HOME/stockade")
		lockTimeout = fs.Duration("lock-timeout", workflow.DefaultLockTimeout, "how long to wait for the data directory's lock (held by a run while it starts, or another reap)")
	)
	return func(ctx context.Context, env *cmdEnv, args []string) error {
		if len(args) != 0 {
			return usagef("reap", "usage: stockade reap [flags]")
		}
		dir, prepare := *dataDir, toolchain.PrepareDataDir
		if dir == "" {
			d, err := workflow.DefaultDataDir()
			if err != nil {
				return err
			}
			dir, prepare = d, toolchain.PrepareDefaultDataDir
		}
		dir, err := prepare(dir)
		if err != nil {
			return err
		}
		lock, err := toolchain.LockDataDir(ctx, dir, *lockTimeout, "reap", func(holder string) {
			fmt.Fprintf(env.stderr, "stockade reap: waiting up to %v for the run holding %s (%s)\n", *lockTimeout, dir, holder)
		})
		if err != nil {
			return err
		}
		defer lock.Unlock()
		eng, err := dockerapi.New("")
		if err != nil {
			return err
		}
		defer eng.Close()
		n, err := toolchain.Reap(ctx, eng, dir)
		fmt.Fprintf(env.stdout, "reaped %d container(s) of %s\n", n, dir)
		if err != nil {
			return err
		}
		runs, err := toolchain.ReapRuns(ctx, eng, lock, cleanupImage(ctx, eng))
		fmt.Fprintf(env.stdout, "removed %d run directory(ies) of %s\n", runs, dir)
		if err != nil {
			return err
		}
		vols, err := toolchain.SweepGoRoots(ctx, eng, container.Budgets{})
		fmt.Fprintf(env.stdout, "removed %d GOROOT volume(s) of gone or superseded images\n", vols)
		return err
	}
}

// cleanupImage returns an image to remove, through a container, what the
// container user left in a run directory and the host user cannot remove:
// one Stockade built, else a pinned toolchain image the engine has; "" when
// there is none (then only the host removes).
func cleanupImage(ctx context.Context, eng *dockerapi.Client) string {
	ctx, cancel := context.WithTimeout(ctx, imageListTimeout)
	defer cancel()
	if infos, err := image.List(ctx, eng); err == nil && len(infos) > 0 {
		return infos[0].ID
	}
	if infos, err := image.ListPinned(ctx, eng, imagetable.Default()); err == nil && len(infos) > 0 {
		return infos[0].ID
	}
	return ""
}
