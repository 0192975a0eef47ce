package docker_test

import (
	"archive/tar"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/docker"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// exampleImage is the image the examples' sandboxes run: any image with a
// shell and busybox's applets (tar among them) will do. TestMain sets it to
// the one internal/image builds.
var exampleImage = "busybox:stable"

// A session's sandbox: provision it, run a command, and reap it. The
// command's exit code, output and timeout are data in the result; an error
// is the backend's own failure.
func Example() {
	ctx := context.Background()
	p, err := docker.New(docker.Config{Owner: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	sb, err := p.Provision(ctx, sandbox.Spec{SessionID: "ex-exec", Image: exampleImage})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Reap(ctx, "ex-exec")
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo hello from $(id -u); exit 3", Timeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d: %s", res.ExitCode, res.Stdout)
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 60 & sleep 60", Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("timed out:", res.TimedOut)
	// Output:
	// exit 3: hello from 65534
	// timed out: true
}

// Files: write several at once (all land, or none), read one back, and
// export a directory of the sandbox as a tar stream.
func Example_files() {
	ctx := context.Background()
	p, err := docker.New(docker.Config{Owner: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	sb, err := p.Provision(ctx, sandbox.Spec{SessionID: "ex-files", Image: exampleImage})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Reap(ctx, "ex-files")
	err = sb.WriteFiles(ctx, []sandbox.FileWrite{
		{Path: "/workspace/src/main.go", Data: []byte("package main\n")},
		{Path: "/workspace/README", Data: []byte("hello\n")},
	})
	if err != nil {
		log.Fatal(err)
	}
	b, err := sb.ReadFile(ctx, "/workspace/README")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("README: %s", b)
	rc, err := p.Export(ctx, "ex-files", "/workspace/src")
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			fmt.Println("exported", h.Name, h.Size, "bytes")
		}
	}
	// Output:
	// README: hello
	// exported src/main.go 13 bytes
}

// NetLimited: the sandbox reaches only the hosts its Networking allows,
// through an egress gate of its own that records every attempt.
func Example_netLimited() {
	ctx := context.Background()
	p, err := docker.New(docker.Config{Owner: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	sb, err := p.Provision(ctx, sandbox.Spec{
		SessionID:  "ex-net",
		Image:      exampleImage,
		Networking: domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{"proxy.golang.org"}},
		Gate:       &sandbox.GateSpec{},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Reap(ctx, "ex-net")
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "wget -q -O - http://elsewhere.test/", Timeout: 20 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fetch failed:", res.ExitCode != 0)
	rec, err := p.EgressLog(ctx, "ex-net")
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rec.Records {
		fmt.Println(r.Method, r.Host, r.Verdict, r.Status)
	}
	// Output:
	// fetch failed: true
	// GET elsewhere.test refused 403
}

// The warm pool: sandboxes of the specs it names are made and started
// ahead, and a Provision of such a spec claims one in milliseconds.
func Example_pool() {
	ctx := context.Background()
	spec := sandbox.Spec{Image: exampleImage}
	p, err := docker.New(docker.Config{Owner: "example", Pool: docker.PoolConfig{Size: 1, Specs: []sandbox.Spec{spec}}})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx) // removes the members no one claimed
	if err := p.WarmPool(ctx); err != nil {
		log.Fatal(err)
	}
	spec.SessionID = "ex-pool"
	sb, err := p.Provision(ctx, spec)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Reap(ctx, "ex-pool")
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo claimed"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", res.Stdout)
	fmt.Println("claims:", p.PoolClaims())
	// Output:
	// claimed
	// claims: 1
}

// Owned and Reap: a platform that restarts finds its owner's sandboxes and
// removes them (or Attaches to them).
func ExampleProvider_Reap() {
	ctx := context.Background()
	p, err := docker.New(docker.Config{Owner: "example-reap"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.Provision(ctx, sandbox.Spec{SessionID: "ex-reap", Image: exampleImage}); err != nil {
		log.Fatal(err)
	}
	// Later, in another process of the same owner:
	q, err := docker.New(docker.Config{Owner: "example-reap"})
	if err != nil {
		log.Fatal(err)
	}
	ids, err := q.Owned(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range ids {
		if err := q.Reap(ctx, id); err != nil {
			log.Fatal(err)
		}
		fmt.Println("reaped", id)
	}
	ids, _ = q.Owned(ctx)
	fmt.Println("left:", len(ids))
	// Output:
	// reaped ex-reap
	// left: 0
}

// TestMain gives the examples their image (the busybox-only base image
// internal/image composes: nothing can be pulled here) when an engine
// answers. Without one, and without STOCKADE_REQUIRE_ENGINE=1, only the
// tests run (they skip): an example cannot skip.
func TestMain(m *testing.M) {
	flag.Parse()
	if img, err := baseImage(); err == nil {
		exampleImage = img
	} else if !enginetest.Required() {
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			flag.Set("test.run", "^Test")
		}
	}
	os.Exit(m.Run())
}

// baseImage builds (or finds) the base image on the engine New finds.
func baseImage() (string, error) {
	c, err := dockerapi.New("")
	if err != nil {
		return "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		return "", err
	}
	cache, err := enginetest.ImageCacheDir()
	if err != nil {
		return "", err
	}
	res, err := image.Build(ctx, c, image.Options{NoGo: true, CacheDir: cache})
	return res.ID, err
}
