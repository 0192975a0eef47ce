package docker

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
	"github.com/stockade/stockade/sandbox/sandboxtest"
)

// counting wraps an engine and counts its calls.
type counting struct {
	engine
	n atomic.Int64
}

func (c *counting) ExecCreate(ctx context.Context, id string, cfg dockerapi.ExecConfig) (string, error) {
	c.n.Add(1)
	return c.engine.ExecCreate(ctx, id, cfg)
}

func (c *counting) ExecStart(ctx context.Context, id string, stdout, stderr io.Writer) error {
	c.n.Add(1)
	return c.engine.ExecStart(ctx, id, stdout, stderr)
}

func (c *counting) ExecStartStdin(ctx context.Context, id string, stdin io.Reader, stdout, stderr io.Writer) error {
	c.n.Add(1)
	return c.engine.ExecStartStdin(ctx, id, stdin, stdout, stderr)
}

func (c *counting) ExecInspect(ctx context.Context, id string) (dockerapi.ExecInspect, error) {
	c.n.Add(1)
	return c.engine.ExecInspect(ctx, id)
}

func (c *counting) ArchivePut(ctx context.Context, id, dir string, r io.Reader, opts dockerapi.PutOptions) error {
	c.n.Add(1)
	return c.engine.ArchivePut(ctx, id, dir, r, opts)
}

func (c *counting) ArchiveGet(ctx context.Context, id, path string) (io.ReadCloser, dockerapi.PathStat, error) {
	c.n.Add(1)
	return c.engine.ArchiveGet(ctx, id, path)
}

// testImage returns the BusyBox-only base image the sessions run.
func testImage(t testing.TB, c *dockerapi.Client) string {
	return enginetest.BaseImage(t, c)
}

// newProvider returns a provider with a fresh owner, and a call counter.
func newProvider(t testing.TB, owner string) (*Provider, *counting) {
	p, err := New(Config{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{engine: p.eng}
	p.eng = c
	return p, c
}

// newGateProvider is newProvider with cfg (gates on a test network).
func newGateProvider(t testing.TB, cfg Config) (*Provider, *counting) {
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{engine: p.eng}
	p.eng = c
	return p, c
}

// leftovers lists what owner still has in the engine.
func leftovers(c *dockerapi.Client, owner string) func(ctx context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		return enginetest.Leftovers(ctx, c, map[string]string{label.Owner: owner})
	}
}

// isPodman reports whether c's engine is Podman (enginetest.Podman).
func isPodman(t testing.TB, c *dockerapi.Client) bool {
	t.Helper()
	return enginetest.Podman(t, c)
}

// TestContract runs the contract suite with the resident agent (the
// default).
func TestContract(t *testing.T) { contract(t, contractRun{}) }

// TestContractNoAgent runs it with every command through engine execs, the
// path the agent falls back to.
func TestContractNoAgent(t *testing.T) { contract(t, contractRun{noAgent: true}) }

// TestContractImageWorkdir runs it on an image that has the workdir
// already, owned by root with mode 0755, as any image with a WORKDIR has
// (issue 23, item 11: on Podman the sandbox user could not write it).
func TestContractImageWorkdir(t *testing.T) {
	contract(t, contractRun{image: func(t *testing.T, c *dockerapi.Client, owner string) string {
		return enginetest.DerivedImage(t, c, owner, testImage(t, c), enginetest.ImageChanges{Dirs: []enginetest.Dir{{Path: sandbox.DefaultWorkdir}}})
	}})
}

// TestContractPool runs it with a warm pool of the suite's specs
// (sandboxtest.Specs: its main sandbox, the plain spec, the hardened, fork
// bomb and memory balloon cases') on both of the suite's providers, each
// Provision of the main provider waiting until its pool is full: every
// sandbox of those specs, the hostile cases' among them, is a claimed
// member. The pool is
// closed before the suite checks that nothing is left.
func TestContractPool(t *testing.T) {
	p := contract(t, contractRun{pool: true})
	t.Logf("%d Provisions served by the pool", p.PoolClaims())
	if n := p.PoolClaims(); n < 10 {
		t.Errorf("PoolClaims() = %d after the suite; want every Provision of a pooled spec served by the pool", n)
	}
}

// TestContract_Runsc runs the contract suite with every session under
// gVisor (Config.Runtime runsc), with the resident agent and the egress
// gate, and gVisor's documented differences (runscDifferences). It runs
// where the engine has the runtime (scripts/runsc-up), and fails without
// it under STOCKADE_REQUIRE_RUNSC=1 (CI's runsc leg). The warm pool under
// gVisor is TestRunsc_Kernel's.
func TestContract_Runsc(t *testing.T) {
	contract(t, contractRun{runtime: enginetest.Runsc(t, enginetest.Client(t))})
}

// runscDifferences are what the contract suite observes otherwise under
// gVisor than under runc (see sandboxtest.KernelDifferences).
var runscDifferences = sandboxtest.KernelDifferences{PidsLimitHidden: true, OOMEndsSandbox: true, FloodBytes: 256 << 20}

// warmFirst is a provider whose Provision waits for its pool to be full.
type warmFirst struct{ *Provider }

func (w warmFirst) Provision(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := w.WarmPool(ctx); err != nil {
		return nil, err
	}
	return w.Provider.Provision(ctx, spec)
}

// TestContractAgentKilled runs the contract suite with the main sandbox's
// agent killed by the session before every case: each case starts on the
// engine path and goes on through the agent launched again a second later.
// The constant-round-trips case cannot hold across that switch (its two
// writes take different paths); it holds on each path, in the two runs
// above.
func TestContractAgentKilled(t *testing.T) {
	contract(t, contractRun{disrupt: func(t *testing.T, p *Provider, sb sandbox.Sandbox) { killAgent(t, p, sb, "KILL") }})
}

// contractRun is how contract runs the suite.
type contractRun struct {
	noAgent bool // without the agent
	pool    bool // with a warm pool of the suite's specs
	// disrupt, when set, runs before every case.
	disrupt func(t *testing.T, p *Provider, sb sandbox.Sandbox)
	// image, when set, makes the image the sessions run; nil is testImage.
	image func(t *testing.T, c *dockerapi.Client, owner string) string
	// runtime is the providers' Config.Runtime; "" is the engine's default.
	runtime string
}

// contract runs the suite on a gated provider as o says. It returns the
// suite's main provider.
func contract(t *testing.T, o contractRun) *Provider {
	noAgent, pool, disrupt := o.noAgent, o.pool, o.disrupt
	c := enginetest.Client(t)
	owner := enginetest.Owner(t)
	img := testImage(t, c)
	if o.image != nil {
		img = o.image(t, c, owner)
	}
	u := enginetest.StartUpstream(t, c, owner)
	cfg := gateConfig(u, owner)
	cfg.NoAgent = noAgent
	cfg.Runtime = o.runtime
	if pool {
		cfg.Pool = PoolConfig{Size: 1, Specs: sandboxtest.Specs(img)}
	}
	p, counter := newGateProvider(t, cfg)
	other, _ := newGateProvider(t, cfg)
	h := sandboxtest.Harness{
		// Podman cannot disable traffic between the containers of a
		// network (see network.go).
		NetUnrestrictedRefused: isPodman(t, c),
		Gate:                   gateHarness(u),
		Provider:               p,
		Other:                  other,
		Image:                  img,
		Stop: func(ctx context.Context, id domain.ID) error {
			return c.ContainerStop(ctx, p.containerName(id), time.Second)
		},
		Squat: func(ctx context.Context, id domain.ID) (func(), error) {
			// Labelled with the owner so a sweep finds it, but not as a
			// session: the provider must refuse it.
			cfg, err := container.Spec{Image: img, Cmd: []string{"true"}, Labels: map[string]string{label.Managed: label.ManagedValue, label.Owner: owner, label.Kind: "squat"}}.Config()
			if err != nil {
				return nil, err
			}
			cid, err := c.ContainerCreate(ctx, p.containerName(id), cfg)
			if err != nil {
				return nil, err
			}
			return func() {
				c.ContainerRemove(context.Background(), cid, dockerapi.RemoveOptions{Force: true, Volumes: true})
			}, nil
		},
		RoundTrips:      counter.n.Load,
		Leftovers:       leftovers(c, owner),
		EntrypointImage: enginetest.DerivedImage(t, c, owner, img, enginetest.ImageChanges{Entrypoint: []string{"/bin/true"}}),
		VolumeImage:     enginetest.DerivedImage(t, c, owner, img, enginetest.ImageChanges{Volumes: []string{"/data"}, Dirs: []enginetest.Dir{{Path: "/data", Mode: 0o1777}}}),
	}
	if o.runtime == "runsc" {
		h.Kernel = runscDifferences
	}
	if pool {
		h.Provider = warmFirst{p}
		h.Close = func(ctx context.Context) error { return errors.Join(p.Close(ctx), other.Close(ctx)) }
	}
	if disrupt != nil {
		h.Disrupt = func(t *testing.T, sb sandbox.Sandbox) { disrupt(t, p, sb) }
		h.RoundTrips = nil
	}
	sandboxtest.Run(t, h)
	return p
}
