package docker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stockade/stockade/sandbox"
)

// BenchmarkFileOps measures each file operation (one script as the sandbox
// user) through the agent's exec and through an engine exec, beside docker
// exec of a stat, the least any of them costs through the CLI:
//
//	go test -run '^$' -bench FileOps -benchtime 20x ./sandbox/docker/
func BenchmarkFileOps(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	if res, err := e.sb.Exec(ctx, sandbox.ExecRequest{Command: "mkdir -p /workspace/ls && cd /workspace/ls && for i in $(seq 100); do : > f$i; done"}); err != nil || res.ExitCode != 0 {
		b.Fatal(res, err)
	}
	n := 0   // operations so far, for fresh names
	cur := 1 // f1 or f2: the one Rename moves
	ops := []struct {
		name string
		op   func() error
	}{
		{"ListDir100", func() error { _, err := e.sb.ListDir(ctx, "/workspace/ls"); return err }},
		{"Stat", func() error { _, err := e.sb.Stat(ctx, "/workspace/ls/f3"); return err }},
		{"MakeDir", func() error { return e.sb.MakeDir(ctx, "/workspace/md/"+strconv.Itoa(n)) }},
		{"Rename", func() error {
			err := e.sb.Rename(ctx, "/workspace/ls/f"+strconv.Itoa(cur), "/workspace/ls/f"+strconv.Itoa(3-cur))
			cur = 3 - cur
			return err
		}},
	}
	for _, via := range []string{"stockade", "stockade-engine"} {
		off := func(b *testing.B) {
			e.p.agent.off = via == "stockade-engine"
			b.Cleanup(func() { e.p.agent.off = false })
		}
		for _, o := range ops {
			b.Run(o.name+"/"+via, func(b *testing.B) {
				off(b)
				timed(b, func(int) {
					if err := o.op(); err != nil {
						b.Fatal(err)
					}
					n++
				})
			})
		}
		b.Run("Remove/"+via, func(b *testing.B) {
			off(b)
			timedPart(b, func(int) time.Duration {
				if err := e.sb.MakeDir(ctx, "/workspace/rm/d"); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if err := e.sb.Remove(ctx, "/workspace/rm", sandbox.RemoveOptions{Recursive: true}); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			})
		})
	}
	b.Run("docker-exec-stat", func(b *testing.B) {
		timed(b, func(int) { dockerCLI(b, "exec", "-u", "65534:65534", e.name, "stat", "/workspace/ls/f3") })
	})
}
