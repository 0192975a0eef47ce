package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/egress"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
	"github.com/stockade/stockade/sandbox/internal/sessiongate"
)

// A NetLimited session has three parts besides its volumes: the sandbox,
// its egress gate (a container running cmd/stockade-gate) and the
// session's gate network, on which the two are the only members; the gate
// is also attached to Config.GateNetwork, its one way out. The topology
// (the internal network without a gateway on a /28 of Config.SubnetPool,
// the alias, the proxy variables, the gate's launch, readiness and record)
// is internal/egress's, which the toolchain's networked profiles use too;
// this file adds what sessions need around it: deterministic names,
// tokens, adoption and healing. See docs/SECURITY.md.

// ErrGateDown reports a gated session whose gate is not running (or not
// there): its sandbox reaches nothing until Provision or Exec heals it.
var ErrGateDown = egress.ErrGateDown

// gateName is the deterministic name of session id's gate container.
func (p *Provider) gateName(id domain.ID) string { return p.objectName("g", string(id)) }

// gateNetName is the deterministic name of session id's gate network.
func (p *Provider) gateNetName(id domain.ID) string { return p.objectName("gn", string(id)) }

// gateLabels are the labels of session id's gate container and network.
func (p *Provider) gateLabels(id domain.ID) map[string]string {
	l := p.labels(id)
	l[label.Role] = label.RoleGate
	return l
}

// gateImage returns the image a gate of spec runs: GateSpec.Image,
// Config.GateImage, or Stockade's own, composed on first use
// (image.BuildGate) and remembered.
func (p *Provider) gateImage(ctx context.Context, g *sandbox.GateSpec) (string, error) {
	if g.Image != "" {
		return g.Image, nil
	}
	p.gateImgMu.Lock()
	defer p.gateImgMu.Unlock()
	if p.gateImg != "" {
		return p.gateImg, nil
	}
	if p.images == nil {
		return "", errors.New("docker: no engine to load the gate image into; give Config.GateImage or GateSpec.Image")
	}
	res, err := image.BuildGate(ctx, p.images, image.Options{Logger: p.log, CacheDir: p.gateCache})
	if err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	p.gateImg = res.ID
	return p.gateImg, nil
}

// resolveGate fills in r's gate: names, container spec and digest. A
// NetUnrestricted session (Config.GateUnrestricted) gets a gate of the
// default image that admits every host.
func (p *Provider) resolveGate(ctx context.Context, r *resolved) error {
	g, any := r.spec.Gate, r.spec.Networking.Mode() == domain.NetUnrestricted
	if g == nil {
		g = &sandbox.GateSpec{}
	}
	id := r.spec.SessionID
	st, err := sessiongate.SessionSettings(id, r.spec.Networking, g, any, p.gatePrivate)
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	img, err := p.gateImage(ctx, g)
	if err != nil {
		return err
	}
	r.gated = true
	r.gateName, r.gateNet = p.gateName(id), p.gateNetName(id)
	r.gateSettings = st
	r.minter = g.TokenMinter
	cs := container.GateSpec(p.owner, string(id))
	// Its environment is made at its create (ensureGate), once its
	// network's range is known.
	cs.Image, cs.Network, cs.Aliases, cs.ExtraHosts = img, r.gateNet, []string{egress.Alias}, p.gateHosts
	r.gateDigest = sessiongate.Digest(img, st, p.gateHosts, p.gateOut)
	cs.Labels[label.Spec] = r.gateDigest
	r.gate = cs
	return nil
}

// ensureGateNetwork makes sure session r's gate network exists and
// isolates as it must, creating it (and recording that in m) if needed.
func (p *Provider) ensureGateNetwork(ctx context.Context, r *resolved, m *made) error {
	id := r.spec.SessionID
	subnet, created, err := egress.EnsureNetwork(ctx, p.eng, egress.NetworkSpec{
		Name: r.gateNet, Labels: p.gateLabels(id), Pool: p.pool, Seed: p.owner + "\x00" + string(id),
	})
	if created {
		m.gateNet = true
	}
	r.gateSubnet = subnet
	if errors.Is(err, egress.ErrNotIsolated) {
		return fmt.Errorf("docker: networking %q: the engine did not keep network %s internal with %s=true, so the sandbox could reach the host past its gate: %w",
			domain.NetLimited, r.gateNet, egress.InhibitOption, sandbox.ErrNetworkingUnsupported)
	}
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	return nil
}

// ensureGate makes sure session r's gate exists, runs and answers, creating
// it if needed. Only the call whose create wins persists a token (minted
// before the create, handed to the gate in its environment, persisted
// before the gate starts); a loser, or a call that finds the gate, mints
// nothing it keeps. What it creates is recorded in m.
func (p *Provider) ensureGate(ctx context.Context, r *resolved, m *made) error {
	id := r.spec.SessionID
	look := func(attempt int) (found, error) {
		c, err := p.eng.ContainerInspect(ctx, r.gateName)
		switch {
		case errors.Is(err, dockerapi.ErrNotFound):
			return absent, nil
		case err != nil:
			return absent, fmt.Errorf("docker: inspect %s: %w", r.gateName, err)
		case !label.Has(c.Config.Labels, p.gateLabels(id)):
			return absent, fmt.Errorf("docker: a container named %s exists without session %s's gate labels; refusing to use it", r.gateName, id)
		case c.Config.Labels[label.Spec] != r.gateDigest:
			return absent, fmt.Errorf("docker: session %s: %w: its gate was made for another policy, image, control plane or gate network (reap the session first)", id, sandbox.ErrSpecMismatch)
		case c.State.Status == "created" && attempt < maxProvisionAttempts-5:
			// The Provision that won the create is persisting its token
			// and connecting the gate: the gate must not start before
			// that.
			return again, nil
		case c.State.Status == "created":
			// Its creator died before persisting its token and starting
			// it: make it again, with a token of ours.
			return absent, p.removeContainer(ctx, c.ID)
		case !c.State.Running:
			// A gate that died starts again.
			if err := p.eng.ContainerStart(ctx, c.ID); err != nil {
				return absent, fmt.Errorf("docker: start gate %s: %w", r.gateName, err)
			}
		}
		return settled, p.waitGate(ctx, c.ID, r.gateName)
	}
	create := func() (found, error) {
		// The gate serves its session's network only and refuses the
		// engine host's addresses, as they are now.
		st, err := egress.SettingsOn(ctx, p.eng, p.engineHost, r.gateSettings, r.gateSubnet)
		if err != nil {
			return absent, fmt.Errorf("docker: %w", err)
		}
		spec := r.gate
		spec.Env = st.Env()
		spec.Address = egress.Address(r.gateSubnet)
		var token string
		if r.minter != nil {
			token = r.minter.Generate()
			spec.Env[gate.EnvToken] = token
		}
		persist := func(ctx context.Context, cid string) error {
			m.gate = cid
			if r.minter == nil {
				return nil
			}
			m.gateToken = true
			if err := r.minter.Persist(ctx, id, token); err != nil {
				return fmt.Errorf("docker: persist the gate token of %s: %w", id, err)
			}
			return nil
		}
		cid, err := egress.Launch(ctx, p.eng, r.gateName, spec, p.gateOut, persist)
		switch {
		case errors.Is(err, dockerapi.ErrConflict) && cid == "":
			// Another Provision won: its token is the session's; this
			// one's is dropped unpersisted.
			return again, nil
		case err != nil:
			return absent, fmt.Errorf("docker: %w", err)
		}
		return settled, p.waitGate(ctx, cid, r.gateName)
	}
	return adoptOrCreate(ctx, r.gateName, maxProvisionAttempts, 20*time.Millisecond, look, create)
}

// gateAddress is where session r's sandbox finds its gate: the gate's
// address on the gate network (egress.Address since gates have a fixed
// one), which the sandbox's /etc/hosts names (egress.HostsLine). The name
// is not left to the engine's DNS, which a sandbox under gVisor cannot
// reach (its network stack is gVisor's own, where 127.0.0.11 is nobody).
func (p *Provider) gateAddress(ctx context.Context, r *resolved) (netip.Addr, error) {
	c, err := p.eng.ContainerInspect(ctx, r.gateName)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("docker: inspect gate %s: %w", r.gateName, err)
	}
	a, err := netip.ParseAddr(c.NetworkSettings.Networks[r.gateNet].IPAddress)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("docker: gate %s has no address on %s: %w", r.gateName, r.gateNet, ErrGateDown)
	}
	return a, nil
}

// waitGate waits until the gate cid answers ready (egress.WaitReady).
func (p *Provider) waitGate(ctx context.Context, cid, name string) error {
	if err := egress.WaitReady(ctx, p.eng, cid, name, p.log); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	return nil
}

// healGate makes sure session id's gate runs before a command of the
// sandbox does: a gate that died is started again; one that is gone is
// ErrGateDown (Provision makes it again).
func (p *Provider) healGate(ctx context.Context, id domain.ID) error {
	name := p.gateName(id)
	c, err := p.eng.ContainerInspect(ctx, name)
	switch {
	case errors.Is(err, dockerapi.ErrNotFound):
		if _, err := p.eng.ContainerInspect(ctx, p.containerName(id)); errors.Is(err, dockerapi.ErrNotFound) {
			return fmt.Errorf("docker: session %s: %w", id, sandbox.ErrNotFound) // reaped
		}
		return fmt.Errorf("docker: session %s: its gate %s is gone; Provision makes it again: %w", id, name, ErrGateDown)
	case err != nil:
		return fmt.Errorf("docker: inspect %s: %w", name, err)
	case !label.Has(c.Config.Labels, p.gateLabels(id)):
		return fmt.Errorf("docker: %s is not session %s's gate: %w", name, id, ErrGateDown)
	case c.State.Running:
		return nil
	}
	p.log.Warn("starting a gate that stopped", "container", name, "session", string(id), "phase", "heal")
	if err := p.eng.ContainerStart(ctx, c.ID); err != nil {
		return fmt.Errorf("docker: start gate %s: %w", name, err)
	}
	return p.waitGate(ctx, c.ID, name)
}

// EgressLog returns what session sessionID's gate recorded: every request
// it saw, oldest first (at most gate.DefaultLogRecords, the oldest dropped
// beyond), with its verdict, and how many records were dropped or had a
// field cut to gate.MaxFieldBytes. A session without a gate is
// sandbox.ErrNotFound; a gate that is not running is ErrGateDown (its
// record went with it: the record lives in the gate's memory).
func (p *Provider) EgressLog(ctx context.Context, sessionID domain.ID) (domain.EgressLog, error) {
	if err := sessionID.Validate(); err != nil {
		return domain.EgressLog{}, fmt.Errorf("docker: %w", err)
	}
	name := p.gateName(sessionID)
	c, err := p.eng.ContainerInspect(ctx, name)
	switch {
	case errors.Is(err, dockerapi.ErrNotFound):
		return domain.EgressLog{}, fmt.Errorf("docker: session %s has no gate: %w", sessionID, sandbox.ErrNotFound)
	case err != nil:
		return domain.EgressLog{}, fmt.Errorf("docker: inspect %s: %w", name, err)
	case !label.Has(c.Config.Labels, p.gateLabels(sessionID)):
		return domain.EgressLog{}, fmt.Errorf("docker: %s is not session %s's gate: %w", name, sessionID, sandbox.ErrNotFound)
	case !c.State.Running:
		return domain.EgressLog{}, fmt.Errorf("docker: session %s: %w", sessionID, ErrGateDown)
	}
	dump, err := egress.ReadLog(ctx, p.eng, c.ID, name, p.log)
	if err != nil {
		return domain.EgressLog{}, fmt.Errorf("docker: %w", err)
	}
	return dump, nil
}

// removeGateNetwork removes session id's gate network if it is there and
// no container uses it any more.
func (p *Provider) removeGateNetwork(ctx context.Context, id domain.ID) error {
	if err := egress.RemoveNetwork(ctx, p.eng, p.gateNetName(id), p.gateLabels(id)); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	return nil
}
