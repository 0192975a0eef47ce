package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"sync"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Config is a gate for Start: its network, its container and its policy.
type Config struct {
	// Name is the gate container's name; Network its gate network's. Both
	// required.
	Name, Network string
	// Spec is the gate container's start (container.ToolchainGateSpec with
	// the gate image); Start adds the gate network, Alias and the
	// environment of Settings. Its labels go on the network too, so a
	// sweep by them finds both.
	Spec container.Spec
	// Settings are the gate's policy and identity (gate.Settings.Env);
	// Start adds its clients' range and the engine host's addresses
	// (SettingsOn).
	Settings gate.Settings
	// Pool is where the gate network's /SubnetBits comes from; the zero
	// value means DefaultPool.
	Pool netip.Prefix
	// Out is the network the gate reaches the outside on; empty means the
	// engine's "bridge".
	Out string
	// Logger receives what the gate's lifecycle does; nil discards.
	Logger *slog.Logger
}

// Gate is a running gate and its network, made by Start for one owner
// (such as a toolchain run) that reads its record in parts (Take) and
// removes both (Close). It is safe for concurrent use.
type Gate struct {
	eng     Engine
	name    string
	network string
	id      string
	labels  map[string]string
	log     *slog.Logger

	mu   sync.Mutex
	seen int64 // records the gate had made (kept and dropped) at the last Take
}

// Start makes c's gate network, creates and starts the gate on it (and on
// c.Out), and waits until it is ready. A Start that fails removes what it
// made, on its own budget.
func Start(ctx context.Context, eng Engine, c Config) (*Gate, error) {
	if c.Name == "" || c.Network == "" || len(c.Spec.Labels) == 0 {
		return nil, errors.New("egress: a gate needs a name, a network name and labels")
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool := c.Pool
	if !pool.IsValid() {
		pool = netip.MustParsePrefix(DefaultPool)
	}
	out := c.Out
	if out == "" {
		out = "bridge"
	}
	g := &Gate{eng: eng, name: c.Name, network: c.Network, labels: maps.Clone(c.Spec.Labels), log: log}
	subnet, _, err := EnsureNetwork(ctx, eng, NetworkSpec{Name: c.Network, Labels: g.labels, Pool: pool, Seed: c.Network})
	if err != nil {
		return nil, errors.Join(err, g.Close(ctx))
	}
	var engineHost string
	if h, ok := eng.(interface{ Host() string }); ok {
		engineHost = h.Host() // *dockerapi.Client's
	}
	st, err := SettingsOn(ctx, eng, engineHost, c.Settings, subnet)
	if err != nil {
		return nil, errors.Join(err, g.Close(ctx))
	}
	spec := c.Spec
	spec.Network, spec.Aliases = c.Network, []string{Alias}
	spec.Env = st.Env()
	id, err := Launch(ctx, eng, c.Name, spec, out, nil)
	g.id = id
	if err == nil {
		err = WaitReady(ctx, eng, id, c.Name, log)
	}
	if err != nil {
		return nil, errors.Join(err, g.Close(ctx))
	}
	log.Debug("gate ready", "container", c.Name, "network", c.Network, "allowed", c.Settings.Policy.Allowed)
	return g, nil
}

// Network is the gate network: the network of the containers behind the
// gate, which also get ProxyEnv.
func (g *Gate) Network() string { return g.network }

// Name is the gate container's name.
func (g *Gate) Name() string { return g.name }

// Take returns the records the gate made since the last Take (all of them
// the first time), oldest first, and how many of those its bound dropped
// before they could be read (gate.DefaultLogRecords are kept). A request
// is recorded when it ends: one still open when Take reads is in a later
// Take. A gate that is not running is ErrGateDown.
func (g *Gate) Take(ctx context.Context) (recs []Record, lost int64, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, err := g.eng.ContainerInspect(ctx, g.id)
	switch {
	case errors.Is(err, dockerapi.ErrNotFound):
		return nil, 0, fmt.Errorf("egress: gate %s is gone: %w", g.name, ErrGateDown)
	case err != nil:
		return nil, 0, fmt.Errorf("egress: inspect %s: %w", g.name, err)
	case !c.State.Running:
		return nil, 0, fmt.Errorf("egress: gate %s %s: %w", g.name, c.State.Status, ErrGateDown)
	}
	dump, err := ReadLog(ctx, g.eng, g.id, g.name, g.log)
	if err != nil {
		return nil, 0, err
	}
	recs, lost = since(dump, g.seen)
	g.seen = int64(len(dump.Records)) + dump.Dropped
	return recs, lost, nil
}

// since returns the records of dump made after the first seen ones (the
// gate made len(Records)+Dropped in all), and how many of those the bound
// dropped.
func since(dump gate.LogDump, seen int64) ([]Record, int64) {
	total := int64(len(dump.Records)) + dump.Dropped
	n := total - seen
	switch {
	case n <= 0:
		return nil, 0
	case n > int64(len(dump.Records)):
		return dump.Records, n - int64(len(dump.Records))
	}
	return dump.Records[int64(len(dump.Records))-n:], 0
}

// Close removes the gate container and then its network, each on its own
// budget even when ctx has ended. It is safe to call more than once; what
// is already gone is no error.
func (g *Gate) Close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if g.id != "" {
		rctx, cancel := context.WithTimeout(ctx, removeBudget)
		err := g.eng.ContainerRemove(rctx, g.id, dockerapi.RemoveOptions{Force: true})
		cancel()
		if err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
			errs = append(errs, fmt.Errorf("egress: remove gate %s: %w", g.name, err))
		}
	}
	rctx, cancel := context.WithTimeout(ctx, removeBudget)
	errs = append(errs, RemoveNetwork(rctx, g.eng, g.network, g.labels))
	cancel()
	return errors.Join(errs...)
}
