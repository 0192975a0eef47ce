package gate

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Policy decides which hosts and addresses the gate admits. The zero value
// admits nothing.
type Policy struct {
	// Allowed lists host names (exact, case-insensitive) and "*.suffix"
	// patterns (any name with at least one more label before suffix, not
	// suffix itself), as domain.Networking.AllowedHosts spells them.
	Allowed []string
	// AnyHost admits every well-formed host name (the unrestricted
	// profile); the address rules still apply.
	AnyHost bool
	// Private lists the private ranges destinations may fall in: an
	// address in one of them is admitted although it is private.
	// Loopback, link-local, unspecified, multicast and broadcast addresses
	// are refused whatever Private says.
	Private []netip.Prefix
	// HostAddrs are the addresses of the engine's host (its interfaces,
	// the gateways of its bridges) and the gate's own: refused whatever
	// Private says, so that no name, public or private, leads to a
	// service of the host. Empty refuses none beyond the other rules.
	HostAddrs []netip.Prefix
}

// Refusal reasons: each is a sentinel the refused request's record and 403
// name, so callers (and tests) match them with errors.Is.
var (
	ErrHostNotAllowed = errors.New("host not allowed")
	ErrBadHost        = errors.New("malformed host")
	ErrAddress        = errors.New("destination address refused")
)

// maxHostLen bounds a host name, in bytes (RFC 1035).
const maxHostLen = 253

// CanonicalHost returns host lower-cased, or ErrBadHost for anything but a
// plain ASCII DNS name or IP literal: a trailing dot ("allowed.test."), a
// label that is empty, too long or holds a byte outside [a-z0-9-] (IDN in
// Unicode, percent-escapes, '_', '*'), or an IPv6 zone. Punycode
// ("xn--...") is an ordinary name: it matches only a pattern spelled the
// same way, never the Unicode name it encodes.
func CanonicalHost(host string) (string, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return "", fmt.Errorf("%w: %q has a zone", ErrBadHost, host)
		}
		return a.Unmap().String(), nil
	}
	h := strings.ToLower(host)
	if h == "" || len(h) > maxHostLen {
		return "", fmt.Errorf("%w: %q", ErrBadHost, host)
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("%w: %q", ErrBadHost, host)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Errorf("%w: %q", ErrBadHost, host)
			}
		}
	}
	return h, nil
}

// AllowHost reports whether host (as the client sent it) may be reached:
// nil, or an error matching ErrBadHost or ErrHostNotAllowed.
func (p Policy) AllowHost(host string) error {
	h, err := CanonicalHost(host)
	if err != nil {
		return err
	}
	if p.AnyHost {
		return nil
	}
	for _, pat := range p.Allowed {
		pat = strings.ToLower(pat)
		if suffix, ok := strings.CutPrefix(pat, "*."); ok {
			if strings.HasSuffix(h, "."+suffix) {
				return nil
			}
		} else if h == pat {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrHostNotAllowed, h)
}

// AllowAddr reports whether a resolved address may be dialled: nil, or an
// error matching ErrAddress that says which rule refused it. IPv4-mapped
// IPv6 addresses are judged as the IPv4 address they carry.
func (p Policy) AllowAddr(a netip.Addr) error {
	a = a.Unmap()
	var why string
	switch {
	case !a.IsValid():
		why = "invalid"
	case a.IsLoopback():
		why = "loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		why = "link-local" // 169.254.169.254, cloud metadata, included
	case a.IsUnspecified():
		why = "unspecified"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		why = "multicast"
	case a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		why = "broadcast"
	case a.Is4() && a.As4()[0] == 0:
		why = "this-network (0.0.0.0/8)"
	case contains(p.HostAddrs, a):
		why = "an address of the engine's host"
	case isPrivate(a):
		if contains(p.Private, a) {
			return nil
		}
		why = "private"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s is %s", ErrAddress, a, why)
}

// sharedSpace is RFC 6598's carrier-grade NAT range, private in all but
// name (some clouds put their metadata and DNS there).
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

func isPrivate(a netip.Addr) bool {
	return a.IsPrivate() || sharedSpace.Contains(a)
}

// contains reports whether a is in one of ps.
func contains(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
