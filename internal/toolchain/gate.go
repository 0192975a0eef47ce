package toolchain

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/egress"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/image"
)

// The profiles with network (Acquire and Mutate with a module proxy, Tool
// always) run behind an egress gate of their run, in the topology of
// internal/egress: the container is on the gate's internal network, which
// has no gateway and no other member, and reaches the outside only through
// the gate's proxy (HTTP_PROXY and HTTPS_PROXY, which the go command
// honours), which admits the hosts GatePolicy names and nothing else. A
// run has one gate per policy (in practice one: the Tool profile builds
// the scanner in a run of its own), started on the first job that needs
// it and removed with the run; its record is read phase by phase
// (Runner.TakeEgress).

// GatePolicy returns the policy of the gate profile p runs behind under
// cfg, and whether p has network at all: false for Execute, and for
// Acquire and Mutate with a fixture proxy (no network, no gate). Acquire
// and Mutate admit the hosts of the configured GOPROXY entries and of the
// checksum database (GOSUMDB's URL, or its name); Tool admits ToolProxy's
// and ToolSumDB's hosts, whatever the run is configured with. Private
// destinations are admitted only inside cfg.GateAllowPrivate.
func GatePolicy(p Profile, cfg Config) (pol gate.Policy, networked bool) {
	var hosts []string
	switch {
	case p == Tool:
		hosts = append(proxyHosts(ToolProxy), sumDBHost(ToolSumDB))
	case p == Execute, cfg.FixtureProxy != "":
		return gate.Policy{}, false
	default:
		env := Env(p, cfg)
		hosts = proxyHosts(env["GOPROXY"])
		if h := sumDBHost(env["GOSUMDB"]); h != "" {
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	return gate.Policy{Allowed: slices.Compact(hosts), Private: slices.Clone(cfg.GateAllowPrivate)}, true
}

// proxyHosts returns the host names of a GOPROXY list (checkProxy has
// refused anything but http(s) URLs), lower-cased.
func proxyHosts(list string) []string {
	var hosts []string
	for _, e := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == '|' }) {
		if u, err := url.Parse(strings.TrimSpace(e)); err == nil && u.Hostname() != "" {
			hosts = append(hosts, strings.ToLower(u.Hostname()))
		}
	}
	return hosts
}

// sumDBHost returns the host the go command asks for GOSUMDB's checksum
// database when no proxy serves it: the host of its URL ("name+key URL"),
// else its name ("sum.golang.org", "name+key"); "" when it is off.
func sumDBHost(sumdb string) string {
	f := strings.Fields(sumdb)
	if len(f) == 0 || strings.EqualFold(f[0], "off") {
		return ""
	}
	if len(f) > 1 {
		u, err := url.Parse(f[1])
		if err != nil {
			return ""
		}
		return strings.ToLower(u.Hostname())
	}
	name, _, _ := strings.Cut(f[0], "+")
	return strings.ToLower(name)
}

// checkGateHosts refuses a proxy or checksum database whose host the gate
// could not admit (a malformed name).
func checkGateHosts(cfg Config) error {
	pol, _ := GatePolicy(Acquire, cfg)
	for _, h := range pol.Allowed {
		if _, err := gate.CanonicalHost(h); err != nil {
			return configErr("Proxy", "%s: the egress gate could not admit it: %v", h, err)
		}
	}
	return nil
}

// runGate is one of the run's gates.
type runGate struct {
	key string // the policy's hosts, joined
	g   *egress.Gate
}

// gateFor returns the run's gate for pol, starting it (and building the
// gate image, when the configuration names none) on first need.
func (r *Runner) gateFor(ctx context.Context, pol gate.Policy) (*egress.Gate, error) {
	key := strings.Join(pol.Allowed, ",")
	r.gateMu.Lock()
	defer r.gateMu.Unlock()
	for _, g := range r.gates {
		if g.key == key {
			return g.g, nil
		}
	}
	img, err := r.gateImage(ctx)
	if err != nil {
		return nil, err
	}
	spec, err := container.ToolchainGateSpec(scopeOf(r.cfg))
	if err != nil {
		return nil, err
	}
	spec.Image = img
	name := container.RandomName("tc-gate")
	g, err := egress.Start(ctx, r.eng, egress.Config{
		Name: name, Network: name + "-net", Spec: spec,
		Settings: gate.Settings{Policy: pol, Session: r.cfg.RunID},
		Out:      r.cfg.GateNetwork, Logger: r.log,
	})
	if err != nil {
		return nil, fmt.Errorf("toolchain: the run's egress gate: %w", err)
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, errors.Join(ErrClosed, g.Close(ctx))
	}
	r.gates = append(r.gates, runGate{key: key, g: g})
	r.log.Info("egress gate started", "container", name, "allowed", strings.Join(pol.Allowed, ","))
	return g, nil
}

// gateImage returns Config.GateImage, or Stockade's own gate image, built
// (image.BuildGate) once per run when the engine can load images, as
// *dockerapi.Client can. Called with r.gateMu held.
func (r *Runner) gateImage(ctx context.Context) (string, error) {
	if r.cfg.GateImage != "" {
		return r.cfg.GateImage, nil
	}
	if r.gateImg != "" {
		return r.gateImg, nil
	}
	ie, ok := r.eng.(image.Engine)
	if !ok {
		return "", errors.New("toolchain: no gate image configured (Config.GateImage) and the engine cannot load one")
	}
	res, err := image.BuildGate(ctx, ie, image.Options{Logger: r.log, CacheDir: filepath.Join(r.dataDir, ToolchainsDir)})
	if err != nil {
		return "", fmt.Errorf("toolchain: %w", err)
	}
	r.gateImg = res.ID
	return r.gateImg, nil
}

// TakeEgress returns what the run's gates recorded since the last
// TakeEgress (everything, the first time), oldest first, and how many of
// those records the gates' bound dropped before they were read: call it
// after each phase to have that phase's record. A run without a gate (a
// fixture proxy, no networked job yet) has none. A gate that is not
// running is egress.ErrGateDown: what went through it cannot be told.
func (r *Runner) TakeEgress(ctx context.Context) ([]domain.EgressRecord, int64, error) {
	r.gateMu.Lock()
	gates := slices.Clone(r.gates)
	r.gateMu.Unlock()
	var all []domain.EgressRecord
	var lost int64
	for _, g := range gates {
		recs, n, err := g.g.Take(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("toolchain: %w", err)
		}
		all, lost = append(all, recs...), lost+n
	}
	slices.SortStableFunc(all, func(a, b domain.EgressRecord) int { return a.Time.Compare(b.Time) })
	return all, lost, nil
}

// closeGates removes the run's gates and their networks.
func (r *Runner) closeGates(ctx context.Context) error {
	r.gateMu.Lock()
	gates := r.gates
	r.gates = nil
	r.gateMu.Unlock()
	var errs []error
	for _, g := range gates {
		errs = append(errs, g.g.Close(ctx))
	}
	return errors.Join(errs...)
}
