package docker

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
)

// platformMain is a platform's program that links this backend: it
// provisions a NetLimited session, fetches an allowed URL through the
// session's egress gate, prints what came back and the gate's record, and
// reaps the session. Its arguments: owner, image, gate network, the
// network's range (GateAllowPrivate).
const platformMain = `package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/docker"
)

func main() {
	if err := run(os.Args[1], os.Args[2], os.Args[3], os.Args[4]); err != nil {
		fmt.Fprintln(os.Stderr, "platform:", err)
		os.Exit(1)
	}
}

func run(owner, image, network, subnet string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := docker.New(docker.Config{Owner: owner, GateNetwork: network, GateAllowPrivate: []netip.Prefix{netip.MustParsePrefix(subnet)}})
	if err != nil {
		return err
	}
	defer p.Close(context.WithoutCancel(ctx))
	sb, err := p.Provision(ctx, sandbox.Spec{
		SessionID:  "outside",
		Image:      image,
		Networking: domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{"allowed.test"}},
		Gate:       &sandbox.GateSpec{},
	})
	if err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	defer p.Reap(context.WithoutCancel(ctx), "outside")
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "busybox wget -q -O - http://allowed.test:8080/from-outside", Timeout: time.Minute})
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	fmt.Printf("exit %d\n%s", res.ExitCode, res.Stdout)
	log, err := p.EgressLog(ctx, "outside")
	if err != nil {
		return fmt.Errorf("egress log: %w", err)
	}
	for _, r := range log.Records {
		fmt.Printf("record %s %s\n", r.Host, r.Verdict)
	}
	return nil
}
`

// TestOutsideTheModule links this backend into a platform's program built
// outside this module's tree (a module of its own that requires Stockade
// through a replace directive) and runs it from / with no go command on
// PATH and no GOFLAGS or GOWORK: it provisions a NetLimited session, whose
// gate image the library composes from what it carries, and reaches an
// allowed host through the gate.
func TestOutsideTheModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program and provisions a gated session")
	}
	c := enginetest.Client(t)
	if isPodman(t, c) {
		t.Skip("Podman refuses NetLimited sessions (ErrNetworkingUnsupported)")
	}
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	u := enginetest.StartUpstream(t, c, owner)

	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	mod := filepath.Join(t.TempDir(), "platform")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := "module example.com/platform\n\ngo 1.26\n\nrequire github.com/stockade/stockade v0.0.0\n\nreplace github.com/stockade/stockade => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(platformMain)} {
		if err := os.WriteFile(filepath.Join(mod, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "platform")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = mod
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the platform's program: %v\n%s", err, out)
	}

	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOFLAGS", "GOWORK", "PWD", "GOROOT", "GOPATH":
		case "PATH":
			env = append(env, "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
		default:
			env = append(env, kv)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, bin, owner, img, u.Network, u.Subnet.String())
	run.Dir, run.Env = "/", env
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	err = run.Run()
	t.Logf("the platform's program from /:\n%s%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("the platform's program failed: %v", err)
	}
	out := stdout.String()
	if !strings.Contains(out, "exit 0\n") || !strings.Contains(out, "path=/from-outside") || !strings.Contains(out, "record allowed.test allowed") {
		t.Errorf("want the allowed fetch through the gate (exit 0, the upstream's answer, the gate's record)")
	}
	left, err := enginetest.Leftovers(ctx, c, map[string]string{label.Owner: owner})
	if err != nil || len(left) != 0 {
		t.Errorf("left after Reap: %v, %v", left, err)
	}
}
