package docker

// Benchmarks of interactive processes, beside the docker CLI doing the same
// job in the same run. Run:
//
//	go test -run '^$' -bench 'Process' -benchtime 20x ./sandbox/docker/

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/stockade/stockade/sandbox"
)

// procs returns the bench sandbox's processes, its channel open.
func procs(b *testing.B, e *benchEnv) sandbox.Processes {
	b.Helper()
	ps, err := sandbox.ProcessesOf(e.sb)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ps.List(context.Background()); err != nil {
		b.Fatal(err)
	}
	return ps
}

// BenchmarkProcessFirstByte: from Start of `echo hi` to its first output
// byte; docker-exec is `docker exec` of the same echo to its first byte.
func BenchmarkProcessFirstByte(b *testing.B) {
	e := setup(b)
	ps := procs(b, e)
	ctx := context.Background()
	b.Run("stockade", func(b *testing.B) {
		timedPart(b, func(int) time.Duration {
			start := time.Now()
			p, err := ps.Start(ctx, sandbox.ProcessRequest{Argv: []string{"echo", "hi"}})
			if err != nil {
				b.Fatal(err)
			}
			if ev, err := p.Next(ctx); err != nil || ev.Type != sandbox.EventStdout {
				b.Fatal(ev, err)
			}
			d := time.Since(start)
			p.Wait(ctx)
			return d
		})
	})
	b.Run("docker-exec", func(b *testing.B) {
		timedPart(b, func(int) time.Duration {
			start := time.Now()
			cmd := exec.Command("docker", "exec", "-u", "65534:65534", e.name, "echo", "hi")
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			var one [1]byte
			if _, err := io.ReadFull(out, one[:]); err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			cmd.Wait()
			return d
		})
	})
}

// BenchmarkProcessStdinRoundTrip: a line written to a running `cat` until
// it comes back; docker-exec is `docker exec -i` of cat.
func BenchmarkProcessStdinRoundTrip(b *testing.B) {
	e := setup(b)
	ps := procs(b, e)
	ctx := context.Background()
	b.Run("stockade", func(b *testing.B) {
		p, err := ps.Start(ctx, sandbox.ProcessRequest{Argv: []string{"cat"}, Stdin: true})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Wait(ctx)
		defer p.CloseStdin(ctx)
		timed(b, func(int) {
			if _, err := p.Write(ctx, []byte("ping\n")); err != nil {
				b.Fatal(err)
			}
			for got := 0; got < 5; {
				ev, err := p.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				got += len(ev.Data)
			}
		})
	})
	b.Run("docker-exec", func(b *testing.B) {
		cmd := exec.Command("docker", "exec", "-i", "-u", "65534:65534", e.name, "cat")
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer cmd.Wait()
		defer in.Close()
		r := bufio.NewReader(out)
		timed(b, func(int) {
			if _, err := in.Write([]byte("ping\n")); err != nil {
				b.Fatal(err)
			}
			if _, err := r.ReadString('\n'); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkProcessThroughput: 100 MiB of `head -c` from /dev/zero read
// whole; docker-exec is `docker exec` of the same head into the bench.
func BenchmarkProcessThroughput(b *testing.B) {
	e := setup(b)
	ps := procs(b, e)
	ctx := context.Background()
	const n = 100 << 20
	b.Run("stockade", func(b *testing.B) {
		b.SetBytes(n)
		timed(b, func(int) {
			p, err := ps.Start(ctx, sandbox.ProcessRequest{Argv: []string{"head", "-c", "104857600", "/dev/zero"}})
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for {
				ev, err := p.Next(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				got += len(ev.Data)
			}
			if got != n {
				b.Fatalf("%d bytes", got)
			}
		})
	})
	b.Run("docker-exec", func(b *testing.B) {
		b.SetBytes(n)
		timed(b, func(int) {
			cmd := exec.Command("docker", "exec", "-u", "65534:65534", e.name, "head", "-c", "104857600", "/dev/zero")
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			got, _ := io.Copy(io.Discard, out)
			cmd.Wait()
			if got != n {
				b.Fatalf("%d bytes", got)
			}
		})
	})
}
