// Package domain holds the small types shared by Stockade's packages and by
// the platforms that call them: session identifiers and networking modes.
//
// Nothing here talks to an engine; the types exist so that the sandbox API,
// its backends and their callers agree on one spelling.
package domain

import (
	"errors"
	"fmt"
	"strings"
)

// ID identifies a session. The zero value is not a valid ID.
//
// An ID names at most one sandbox per Owner at a time; backends derive
// container names from it, so Validate limits it to a portable alphabet.
type ID string

// MaxIDLen is the longest session ID accepted, in bytes. Container names
// built from it stay well under the engines' 253-byte limits.
const MaxIDLen = 128

// ErrInvalidID reports a session ID that is empty, too long, or uses a
// character outside [A-Za-z0-9_.-], or does not start with a letter or digit.
var ErrInvalidID = errors.New("domain: invalid session id")

// Validate reports whether id can name a session.
func (id ID) Validate() error {
	s := string(id)
	if s == "" {
		return fmt.Errorf("%w: empty", ErrInvalidID)
	}
	if len(s) > MaxIDLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidID, len(s), MaxIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return fmt.Errorf("%w: %q must start with a letter or digit", ErrInvalidID, s)
		}
		if !alnum && c != '_' && c != '.' && c != '-' {
			return fmt.Errorf("%w: %q has %q; allowed are letters, digits, '_', '.', '-'", ErrInvalidID, s, c)
		}
	}
	return nil
}

// NetworkingType is a sandbox's network mode. The zero value means NetNone.
type NetworkingType string

const (
	// NetNone gives the sandbox no interface but loopback.
	NetNone NetworkingType = "none"
	// NetLimited allows egress only to AllowedHosts, through the egress gate.
	NetLimited NetworkingType = "limited"
	// NetUnrestricted gives the sandbox ordinary bridge networking.
	NetUnrestricted NetworkingType = "unrestricted"
)

// ErrInvalidNetworking reports an unknown networking type or a malformed
// allowed host.
var ErrInvalidNetworking = errors.New("domain: invalid networking")

// Networking says what network a sandbox gets. The zero value is NetNone
// with no allowed hosts: the most locked-down setting.
type Networking struct {
	// Type is the mode; "" means NetNone.
	Type NetworkingType
	// AllowedHosts lists the hosts NetLimited may reach: bare host names
	// ("proxy.golang.org") or one leading wildcard label ("*.example.com").
	// It must be empty for the other modes.
	AllowedHosts []string
}

// Mode returns n.Type with the zero value resolved to NetNone.
func (n Networking) Mode() NetworkingType {
	if n.Type == "" {
		return NetNone
	}
	return n.Type
}

// Validate checks the mode and every allowed host.
func (n Networking) Validate() error {
	switch n.Mode() {
	case NetNone, NetUnrestricted:
		if len(n.AllowedHosts) > 0 {
			return fmt.Errorf("%w: allowed hosts are only meaningful with %q", ErrInvalidNetworking, NetLimited)
		}
	case NetLimited:
		for _, h := range n.AllowedHosts {
			if err := validHost(h); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: unknown type %q", ErrInvalidNetworking, n.Type)
	}
	return nil
}

// Equal reports whether n and m ask for the same network, treating the zero
// type as NetNone and ignoring the order of AllowedHosts.
func (n Networking) Equal(m Networking) bool {
	if n.Mode() != m.Mode() || len(n.AllowedHosts) != len(m.AllowedHosts) {
		return false
	}
	seen := make(map[string]int, len(n.AllowedHosts))
	for _, h := range n.AllowedHosts {
		seen[strings.ToLower(h)]++
	}
	for _, h := range m.AllowedHosts {
		k := strings.ToLower(h)
		if seen[k] == 0 {
			return false
		}
		seen[k]--
	}
	return true
}

func validHost(h string) error {
	name := strings.TrimPrefix(h, "*.")
	if name == "" || len(h) > 253 {
		return fmt.Errorf("%w: allowed host %q", ErrInvalidNetworking, h)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%w: allowed host %q", ErrInvalidNetworking, h)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("%w: allowed host %q has %q", ErrInvalidNetworking, h, c)
			}
		}
	}
	return nil
}
