package docker

// Benchmarks of the jobs the issue measures, each beside the docker CLI doing
// the same job in the same run, so ratios can be taken. Every sub-benchmark
// reports its median as p50-ms besides the mean ns/op. The sandbox's agent
// runs before the first iteration; "stockade-engine" rows run the same job
// with every command through an engine exec. Run:
//
//	go test -run '^$' -bench . -benchtime 10x ./sandbox/docker/

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
)

// timed runs op b.N times and reports the median besides the mean.
func timed(b *testing.B, op func(i int)) {
	b.Helper()
	timedPart(b, func(i int) time.Duration {
		start := time.Now()
		op(i)
		return time.Since(start)
	})
}

// timedPart runs op b.N times and reports the median of the durations it
// returns (the part of each run that counts).
func timedPart(b *testing.B, op func(i int) time.Duration) {
	b.Helper()
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		durs = append(durs, op(i))
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "p50-ms")
}

// dockerCLI runs the docker CLI, failing b on error.
func dockerCLI(b *testing.B, args ...string) {
	b.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		b.Fatalf("docker %v: %v\n%s", args, err, out)
	}
}

type benchEnv struct {
	p     *Provider
	img   string
	owner string
	sb    sandbox.Sandbox
	name  string // container name of sb
}

// setup provisions one running sandbox for a benchmark, removed at its end.
func setup(b *testing.B) *benchEnv {
	b.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		b.Skip("no docker CLI to compare with")
	}
	c := enginetest.Client(b)
	e := &benchEnv{img: testImage(b, c), owner: enginetest.Owner(b)}
	e.p, _ = newProvider(b, e.owner)
	ctx := context.Background()
	id := domain.ID("bench")
	sb, err := e.p.Provision(ctx, sandbox.Spec{SessionID: id, Image: e.img})
	if err != nil {
		b.Fatal(err)
	}
	e.sb, e.name = sb, e.p.containerName(id)
	b.Cleanup(func() { sb.Destroy(context.Background()) })
	waitAgent(b, e.p, sb)
	return e
}

func BenchmarkProvisionExecDestroy(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	b.Run("stockade", func(b *testing.B) {
		timed(b, func(i int) {
			sb, err := e.p.Provision(ctx, sandbox.Spec{SessionID: domain.ID("pd-" + strconv.Itoa(i)), Image: e.img})
			if err != nil {
				b.Fatal(err)
			}
			if res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
			if err := sb.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("docker-run-rm", func(b *testing.B) {
		timed(b, func(int) {
			dockerCLI(b, "run", "--rm", "--network", "none", "--label", label.Owner+"="+e.owner, e.img, "true")
		})
	})
}

// BenchmarkProvisionFirstExec measures Provision -> first Exec `true`
// (-> Destroy, for the rows that say so) from a warm pool (Config.Pool of
// the spec, filled again before each iteration, outside the time), without
// a pool, and `docker run --rm` doing the same, in one run, interleaved
// against drift in the load.
func BenchmarkProvisionFirstExec(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	spec := sandbox.Spec{Image: e.img}
	pooled, err := New(Config{Owner: e.owner, Pool: PoolConfig{Size: 1, Specs: []sandbox.Spec{spec}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pooled.Close(context.Background()) })
	run := func(b *testing.B, p *Provider, tag string, destroy bool) {
		timedPart(b, func(i int) time.Duration {
			if err := p.WarmPool(ctx); err != nil {
				b.Fatal(err)
			}
			s := spec
			s.SessionID = domain.ID(fmt.Sprintf("fe-%s-%v-%d", tag, destroy, i))
			start := time.Now()
			sb, err := p.Provision(ctx, s)
			if err != nil {
				b.Fatal(err)
			}
			if res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
			d := time.Since(start)
			if err := sb.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
			if destroy {
				d = time.Since(start)
			}
			return d
		})
	}
	for i := 0; i < 2; i++ {
		b.Run("pool", func(b *testing.B) { run(b, pooled, "pool", false) })
		b.Run("pool-destroy", func(b *testing.B) { run(b, pooled, "pool", true) })
		b.Run("no-pool-destroy", func(b *testing.B) { run(b, e.p, "none", true) })
		b.Run("docker-run-rm", func(b *testing.B) {
			timed(b, func(int) {
				dockerCLI(b, "run", "--rm", "--network", "none", "--label", label.Owner+"="+e.owner, e.img, "true")
			})
		})
	}
}

func BenchmarkExec(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	exec := func(b *testing.B) {
		timed(b, func(int) {
			if res, err := e.sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		})
	}
	b.Run("stockade", exec) // through the agent
	b.Run("stockade-engine", func(b *testing.B) {
		e.p.agent.off = true // every command through an engine exec
		defer func() { e.p.agent.off = false }()
		exec(b)
	})
	b.Run("docker-exec", func(b *testing.B) {
		timed(b, func(int) { dockerCLI(b, "exec", "-u", "65534:65534", e.name, "true") })
	})
}

func BenchmarkWriteFiles1000(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	dir := b.TempDir()
	var files []sandbox.FileWrite
	for i := 0; i < 1000; i++ {
		rel := fmt.Sprintf("d%d/f%d.txt", i%10, i)
		data := []byte(fmt.Sprintf("file %d\n", i))
		files = append(files, sandbox.FileWrite{Path: "/workspace/wf/" + rel, Data: data})
		os.MkdirAll(filepath.Join(dir, "wf", filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(dir, "wf", rel), data, 0o644)
	}
	write := func(b *testing.B) {
		timed(b, func(int) {
			if err := e.sb.WriteFiles(ctx, files); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.Run("stockade", write)
	b.Run("stockade-engine", func(b *testing.B) {
		e.p.agent.off = true
		defer func() { e.p.agent.off = false }()
		write(b)
	})
	b.Run("docker-cp", func(b *testing.B) {
		timed(b, func(int) { dockerCLI(b, "cp", filepath.Join(dir, "wf")+"/.", e.name+":/workspace/wfcli") })
	})
}

func BenchmarkWriteFile1MiB(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	host := filepath.Join(b.TempDir(), "one.bin")
	os.WriteFile(host, data, 0o644)
	write := func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		timed(b, func(int) {
			if err := e.sb.WriteFile(ctx, "/workspace/one.bin", data); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.Run("stockade", write)
	b.Run("stockade-engine", func(b *testing.B) {
		e.p.agent.off = true
		defer func() { e.p.agent.off = false }()
		write(b)
	})
	b.Run("docker-cp", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		timed(b, func(int) { dockerCLI(b, "cp", host, e.name+":/workspace/one-cli.bin") })
	})
}

func BenchmarkReadFile1MiB(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	if err := e.sb.WriteFile(ctx, "/workspace/one.bin", data); err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(b.TempDir(), "out.bin")
	b.Run("stockade", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		timed(b, func(int) {
			if got, err := e.sb.ReadFile(ctx, "/workspace/one.bin"); err != nil || len(got) != len(data) {
				b.Fatal(len(got), err)
			}
		})
	})
	b.Run("docker-cp", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		timed(b, func(int) { dockerCLI(b, "cp", e.name+":/workspace/one.bin", dst) })
	})
}

// BenchmarkAgent measures what the agent adds: placing it (a provider's
// first Provision: the volume made and filled through a filler container),
// launching it in a sandbox (one exec with stdin attached, up to its
// hello), and a Provision of a sandbox with and without its mount.
func BenchmarkAgent(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	b.Run("place", func(b *testing.B) {
		timed(b, func(int) {
			p, _ := newProvider(b, enginetest.Owner(b))
			if _, ok := p.agentMount(ctx, e.img); !ok {
				b.Fatal("the agent was not placed")
			}
			if err := p.removeAgentIfUnused(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("launch", func(b *testing.B) {
		timedPart(b, func(int) time.Duration {
			start := time.Now()
			c, err := e.p.startAgent(ctx, e.sb.(*box))
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			c.Close()
			return d
		})
	})
	provision := func(b *testing.B, off bool) {
		e.p.agent.off = off
		defer func() { e.p.agent.off = false }()
		timedPart(b, func(i int) time.Duration {
			start := time.Now()
			sb, err := e.p.Provision(ctx, sandbox.Spec{SessionID: domain.ID(fmt.Sprintf("ap-%v-%d", off, i)), Image: e.img})
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			if !off {
				waitAgent(b, e.p, sb) // its launch does not overlap the next Provision
			}
			sb.Destroy(ctx)
			return d
		})
	}
	for i := 0; i < 2; i++ { // interleaved, against drift in the load
		b.Run("provision", func(b *testing.B) { provision(b, false) })
		b.Run("provision-no-agent", func(b *testing.B) { provision(b, true) })
	}
}

// BenchmarkRuntime measures, per runtime (the engine's default, runc, and
// gVisor's runsc when the engine has it), in one run and interleaved
// against drift in the load: Provision -> first Exec `true` -> Destroy
// without a pool, Exec `true` through the agent, WriteFiles of 1,000
// files, and what an idle session adds to the memory the engine's host
// uses (idle-MiB, from /proc/meminfo around ten sandboxes). Run:
//
//	go test -run '^$' -bench BenchmarkRuntime -benchtime 10x ./sandbox/docker/
func BenchmarkRuntime(b *testing.B) {
	c := enginetest.Client(b)
	img, owner := testImage(b, c), enginetest.Owner(b)
	runtimes := []string{"runc", enginetest.Runsc(b, c)}
	ctx := context.Background()
	var files []sandbox.FileWrite
	for i := 0; i < 1000; i++ {
		files = append(files, sandbox.FileWrite{Path: fmt.Sprintf("/workspace/wf/d%d/f%d.txt", i%10, i), Data: []byte(fmt.Sprintf("file %d\n", i))})
	}
	providers := map[string]*Provider{}
	sbs := map[string]sandbox.Sandbox{}
	for _, rt := range runtimes {
		p, err := New(Config{Owner: owner, Runtime: rt})
		if err != nil {
			b.Fatal(err)
		}
		sb, err := p.Provision(ctx, sandbox.Spec{SessionID: domain.ID("rt-" + rt), Image: img})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sb.Destroy(context.Background()) })
		waitAgent(b, p, sb)
		providers[rt], sbs[rt] = p, sb
	}
	for round := 0; round < 2; round++ {
		for _, rt := range runtimes {
			p, sb := providers[rt], sbs[rt]
			b.Run("provision-exec-destroy/"+rt, func(b *testing.B) {
				timed(b, func(i int) {
					s, err := p.Provision(ctx, sandbox.Spec{SessionID: domain.ID(fmt.Sprintf("rt-ped-%s-%d-%d", rt, round, i)), Image: img})
					if err != nil {
						b.Fatal(err)
					}
					if res, err := s.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
						b.Fatal(res, err)
					}
					if err := s.Destroy(ctx); err != nil {
						b.Fatal(err)
					}
				})
			})
			b.Run("exec/"+rt, func(b *testing.B) {
				timed(b, func(int) {
					if res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
						b.Fatal(res, err)
					}
				})
			})
			b.Run("writefiles-1000/"+rt, func(b *testing.B) {
				timed(b, func(int) {
					if err := sb.WriteFiles(ctx, files); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
	for _, rt := range runtimes {
		b.Run("idle-memory/"+rt, func(b *testing.B) {
			const n = 10
			for i := 0; i < b.N; i++ {
				before := memUsed(b)
				var made []sandbox.Sandbox
				for j := 0; j < n; j++ {
					s, err := providers[rt].Provision(ctx, sandbox.Spec{SessionID: domain.ID(fmt.Sprintf("rt-idle-%s-%d-%d", rt, i, j)), Image: img})
					if err != nil {
						b.Fatal(err)
					}
					waitAgent(b, providers[rt], s)
					made = append(made, s)
				}
				time.Sleep(2 * time.Second)
				b.ReportMetric(float64(memUsed(b)-before)/n/(1<<20), "idle-MiB")
				for _, s := range made {
					s.Destroy(ctx)
				}
			}
		})
	}
}

// memUsed is MemTotal - MemAvailable of the host, in bytes.
func memUsed(b *testing.B) int64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		b.Skip(err)
	}
	var total, avail int64
	for _, l := range bytes.Split(raw, []byte("\n")) {
		f := bytes.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(string(f[1]), 10, 64)
		switch string(f[0]) {
		case "MemTotal:":
			total = n << 10
		case "MemAvailable:":
			avail = n << 10
		}
	}
	return total - avail
}
