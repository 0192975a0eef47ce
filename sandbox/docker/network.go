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
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// NetUnrestricted sandboxes of one owner share one bridge network, created
// on first need and removed by the Reap (or Destroy) that leaves the owner
// without session containers. Inter-container traffic is disabled on it, so
// sandboxes cannot reach one another; they still reach the host's addresses
// through the gateway, and the outside world through the host's NAT. An
// engine that does not keep that setting (Podman 4 ignores the option) gets
// NetUnrestricted refused with sandbox.ErrNetworkingUnsupported.
//
// Docker's default address pools run out after about 30 networks, so the
// network takes a /24 (ownerSubnetBits) of Config.SubnetPool itself: the
// slot a hash of the owner names, or the next free one.

// DefaultSubnetPool is the IPv4 range owners' networks take their subnets
// from when Config.SubnetPool is empty: 256 owners' networks of /24.
const DefaultSubnetPool = egress.DefaultPool

// ownerSubnetBits is the prefix length of an owner's subnet: 253 addresses
// for sandboxes (a /24 less network, gateway and broadcast), so at most 253
// NetUnrestricted sandboxes of one owner at once.
const ownerSubnetBits = 24

// iccOption is the bridge driver option that, set to "false", drops traffic
// between containers of the bridge.
const iccOption = "com.docker.network.bridge.enable_icc"

// parsePool checks a Config.SubnetPool: an IPv4 CIDR, masked, wide enough
// for one owner's subnet.
func parsePool(s string) (netip.Prefix, error) {
	if s == "" {
		s = DefaultSubnetPool
	}
	pool, err := netip.ParsePrefix(s)
	if err != nil || !pool.Addr().Is4() || pool.Masked() != pool || pool.Bits() > ownerSubnetBits {
		return netip.Prefix{}, fmt.Errorf("docker: subnet pool %q: want a masked IPv4 CIDR of /%d or wider", s, ownerSubnetBits)
	}
	return pool, nil
}

// networkName is the deterministic name of the owner's network: the owner
// itself, so owners never share a name.
func (p *Provider) networkName() string {
	return container.NamePrefix + "net-" + p.owner
}

// ownNetwork reports whether n is this owner's sandbox network as
// networkFor makes it: our labels and a bridge that is not internal. Only
// one that also isolates is used.
func (p *Provider) ownNetwork(n dockerapi.Network) bool {
	l := n.Labels
	return label.Has(l, label.Base(p.owner, label.KindSession)) && l[label.Session] == "" &&
		n.Driver == "bridge" && !n.Internal
}

// isolates reports whether the engine kept inter-container traffic
// disabled on n. Podman 4 does not know the option: it creates the
// network without it (with a warning) and containers on it reach each
// other, so sandboxes on it could too.
func isolates(n dockerapi.Network) bool {
	return n.Options[iccOption] == "false"
}

// errNoIsolation is networkFor's refusal on an engine that does not
// isolate the containers of a bridge (Podman 4).
func (p *Provider) errNoIsolation(name string) error {
	return fmt.Errorf("docker: networking %q: the engine did not keep %s=false on network %s, so sandboxes on it could reach each other (Podman cannot disable traffic between the containers of a network): %w",
		domain.NetUnrestricted, iccOption, name, sandbox.ErrNetworkingUnsupported)
}

// findNetwork returns the network named name, or ErrNotFound.
func (p *Provider) findNetwork(ctx context.Context, name string) (dockerapi.Network, error) {
	n, err := egress.FindNetwork(ctx, p.eng, name)
	if err != nil {
		return n, fmt.Errorf("docker: %w", err)
	}
	return n, nil
}

// networkFor returns the name of the owner's network, creating it if
// needed. Concurrent calls, in this process or others, converge: a create
// that finds the name taken uses the network it finds after checking it.
func (p *Provider) networkFor(ctx context.Context) (string, error) {
	name := p.networkName()
	look := func(int) (found, error) {
		n, err := p.findNetwork(ctx, name)
		switch {
		case errors.Is(err, dockerapi.ErrNotFound):
			return absent, nil
		case err != nil:
			return absent, err
		case !p.ownNetwork(n):
			return absent, fmt.Errorf("docker: network %s exists but is not this owner's sandbox network (labels or driver differ); refusing to attach sandboxes to it", name)
		case !isolates(n):
			return absent, p.errNoIsolation(name)
		}
		return settled, nil
	}
	create := func() (found, error) {
		subnet, err := egress.FreeSubnet(ctx, p.eng, p.pool, ownerSubnetBits, p.owner)
		if err != nil {
			return absent, fmt.Errorf("docker: %w", err)
		}
		_, err = p.eng.NetworkCreate(ctx, dockerapi.NetworkCreate{
			Name:           name,
			Driver:         "bridge",
			Labels:         label.Base(p.owner, label.KindSession),
			Options:        map[string]string{iccOption: "false"},
			IPAM:           &dockerapi.IPAM{Config: []dockerapi.IPAMConfig{{Subnet: subnet.String()}}},
			CheckDuplicate: true,
		})
		switch {
		case err == nil:
			p.log.Info("network created", "network", name, "subnet", subnet.String())
			// What the engine made, not what was asked, decides: look
			// again (a Reap elsewhere may already have removed it).
			return again, nil
		case errors.Is(err, dockerapi.ErrConflict), errors.Is(err, dockerapi.ErrForbidden):
			// The name (another process made the network) or the subnet
			// (another network took it) went meanwhile: look again.
			return again, nil
		}
		return absent, fmt.Errorf("docker: create network %s: %w", name, err)
	}
	err := adoptOrCreate(ctx, name, egress.NetworkRounds, 20*time.Millisecond, look, create)
	if errors.Is(err, errUnsettled) {
		return "", fmt.Errorf("docker: create network %s: still taken by creates that never showed it, or no free /%d in %s, after %d rounds", name, ownerSubnetBits, p.pool, egress.NetworkRounds)
	}
	if err != nil {
		return "", err
	}
	return name, nil
}

// networkGone reports whether the owner's network no longer exists (a Reap
// in another process removed it between networkFor and its use).
func (p *Provider) networkGone(ctx context.Context) bool {
	_, err := p.findNetwork(ctx, p.networkName())
	return errors.Is(err, dockerapi.ErrNotFound)
}

// removeNetworkIfUnused removes the owner's network when no session
// container of the owner is left, in any state: the engine refuses to
// remove a network running containers use, but not one a created container
// is still to use. A network still in use is left to a later Reap.
func (p *Provider) removeNetworkIfUnused(ctx context.Context) error {
	name := p.networkName()
	n, err := p.findNetwork(ctx, name)
	if errors.Is(err, dockerapi.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !p.ownNetwork(n) {
		return nil // not ours to remove
	}
	cs, err := p.sessionContainers(ctx)
	if err != nil {
		return err
	}
	if len(cs) > 0 {
		return nil
	}
	err = p.eng.NetworkRemove(ctx, n.ID)
	if err == nil || errors.Is(err, dockerapi.ErrNotFound) || errors.Is(err, dockerapi.ErrForbidden) || errors.Is(err, dockerapi.ErrConflict) {
		return nil
	}
	return fmt.Errorf("docker: remove network %s: %w", name, err)
}
