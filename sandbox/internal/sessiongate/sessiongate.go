// Package sessiongate is what every session backend (sandbox/docker,
// sandbox/kubernetes) makes a session's egress gate from, so that the gate's
// settings, their checks and their digest exist once. The gate's topology
// (its network, launch, readiness, record) is internal/egress's, below both
// faces; this package is the session side of it, and the only one of the two
// that knows the session API's types (sandbox.GateSpec, its errors).
package sessiongate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/sandbox"
)

// ParsePrivate checks a backend's GateAllowPrivate: every entry must be a
// valid prefix; each is returned masked. A nil or empty list admits no
// private range.
func ParsePrivate(ps []netip.Prefix) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, len(ps))
	for i, pr := range ps {
		if !pr.IsValid() {
			return nil, fmt.Errorf("GateAllowPrivate[%d] is not a prefix", i)
		}
		out[i] = pr.Masked()
	}
	return out, nil
}

// CheckExtraHosts checks a backend's GateExtraHosts: each entry is
// "name:address", a host name the gate accepts and an IPv4 or IPv6
// address.
func CheckExtraHosts(hs []string) error {
	for _, h := range hs {
		name, addr, ok := strings.Cut(h, ":")
		if _, err := gate.CanonicalHost(name); !ok || err != nil {
			return fmt.Errorf("GateExtraHosts entry %q: want name:address", h)
		}
		if _, err := netip.ParseAddr(addr); err != nil {
			return fmt.Errorf("GateExtraHosts entry %q: %w", h, err)
		}
	}
	return nil
}

// SessionSettings returns the settings of session id's gate: the allowed
// hosts of n lower-cased and sorted (anyHost admits every host instead:
// the unrestricted profile), the private ranges the backend admits, and
// g's control plane and telemetry (g nil: none). A bad OTelEndpoint is
// sandbox.ErrInvalidGate. The token is not set: the backend mints it.
func SessionSettings(id domain.ID, n domain.Networking, g *sandbox.GateSpec, anyHost bool, private []netip.Prefix) (gate.Settings, error) {
	if g == nil {
		g = &sandbox.GateSpec{}
	}
	pol := gate.Policy{AnyHost: anyHost, Private: private}
	if g.OTelEndpoint != "" {
		if _, err := gate.CheckOTelEndpoint(g.OTelEndpoint, g.OTelInsecure, pol); err != nil {
			return gate.Settings{}, fmt.Errorf("GateSpec.OTelEndpoint: %w: %w", sandbox.ErrInvalidGate, err)
		}
	}
	hosts := make([]string, len(n.AllowedHosts))
	for i, h := range n.AllowedHosts {
		hosts[i] = strings.ToLower(h)
	}
	slices.Sort(hosts)
	pol.Allowed = hosts
	return gate.Settings{
		Policy:       pol,
		Session:      string(id),
		Controlplane: g.ControlplaneURL,
		OTel:         g.OTelEndpoint,
		OTelInsecure: g.OTelInsecure,
	}, nil
}

// Digest is the digest of a session gate made from image img and settings
// s (without its token), with extraHosts pinned for it and out the way
// out it is given (a network name, or "" where there is no choice): an
// existing gate with another digest was made for another policy, and
// adopting it is sandbox.ErrSpecMismatch. 24 hex digits.
func Digest(img string, s gate.Settings, extraHosts []string, out string) string {
	env := s.Env()
	parts := []string{img, strings.Join(s.Policy.Allowed, ","), env[gate.EnvAny], env[gate.EnvPrivate],
		strings.Join(extraHosts, ","), s.Controlplane, out, env[gate.EnvOTel], env[gate.EnvOTelInsecure]}
	// Where the gate listens is part of what it is made from only when
	// it is not the default (so gates made before it existed keep theirs).
	if s.Listen != "" || s.Control != "" {
		parts = append(parts, s.Listen, s.Control)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:12])
}
