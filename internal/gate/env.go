package gate

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// The environment the backend gives the gate container.
const (
	EnvAllow        = "STOCKADE_GATE_ALLOW"         // allowed hosts, comma-separated
	EnvAny          = "STOCKADE_GATE_ANY"           // "1": admit every host (unrestricted profile)
	EnvPrivate      = "STOCKADE_GATE_PRIVATE"       // admitted private ranges, comma-separated CIDRs
	EnvSession      = "STOCKADE_GATE_SESSION"       // the session ID
	EnvToken        = "STOCKADE_GATE_TOKEN"         // the session's gate token; may be empty
	EnvControlplane = "STOCKADE_GATE_CONTROLPLANE"  // the control plane URL; "" for none
	EnvOTel         = "STOCKADE_GATE_OTEL"          // OTLP/HTTP endpoint; "" for none
	EnvOTelInsecure = "STOCKADE_GATE_OTEL_INSECURE" // "1": plain HTTP to the endpoint
	EnvListen       = "STOCKADE_GATE_LISTEN"        // proxy address; "" for Settings.ListenOn's choice
	EnvControl      = "STOCKADE_GATE_CONTROL"       // control socket; "" for ControlSocket
	EnvClients      = "STOCKADE_GATE_CLIENTS"       // ranges proxy clients connect from, comma-separated CIDRs
	EnvHostAddrs    = "STOCKADE_GATE_HOST_ADDRS"    // the engine host's addresses, comma-separated CIDRs
)

// Settings is what the gate's environment says.
type Settings struct {
	Policy       Policy
	Session      string
	Token        string
	Controlplane string
	OTel         string
	OTelInsecure bool
	// Listen is the proxy's TCP address ("ip:port"); "" means port Port
	// on the gate's own address inside Clients (ListenOn). A gate sharing
	// its network namespace with the sandbox (sandbox/kubernetes) listens
	// on loopback.
	Listen string
	// Clients are the ranges the proxy's clients connect from: the
	// session's gate network (sandbox/docker, internal/egress). A
	// connection from anywhere else (the gate's outside network) is
	// closed unserved. Loopback is always a client; empty means loopback
	// only (a gate sharing its network namespace with the sandbox).
	Clients []netip.Prefix
	// Control is the control socket's address: a path, or "@name" for an
	// abstract socket; "" means ControlSocket. A gate sharing its network
	// namespace with the sandbox uses a path in a directory only the gate
	// container mounts: an abstract socket is reachable from the whole
	// network namespace.
	Control string
}

// ErrNoClientSide reports a gate none of whose addresses is in its
// Clients: it has no side to serve.
var ErrNoClientSide = errors.New("gate: none of its addresses is in its clients' ranges")

// ListenOn returns the proxy's address for a gate whose interfaces have
// the addresses own: s.Listen; else port Port on the first of own inside
// s.Clients (the gate's address on its session's network, so nothing on
// its outside network reaches the port), or on 127.0.0.1 when Clients is
// empty. A gate with Clients but no address in them is ErrNoClientSide.
func (s Settings) ListenOn(own []netip.Addr) (string, error) {
	if s.Listen != "" {
		return s.Listen, nil
	}
	if len(s.Clients) == 0 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), Port).String(), nil
	}
	for _, a := range own {
		if contains(s.Clients, a.Unmap()) {
			return netip.AddrPortFrom(a.Unmap(), Port).String(), nil
		}
	}
	return "", fmt.Errorf("%w: %v (has %v)", ErrNoClientSide, s.Clients, own)
}

// ControlOr returns s.Control, or ControlSocket when it is empty.
func (s Settings) ControlOr() string {
	if s.Control == "" {
		return ControlSocket
	}
	return s.Control
}

// Env returns the environment that gives a gate s (see Settings).
func (s Settings) Env() map[string]string {
	env := map[string]string{
		EnvAllow:        strings.Join(s.Policy.Allowed, ","),
		EnvPrivate:      joinPrefixes(s.Policy.Private),
		EnvSession:      s.Session,
		EnvToken:        s.Token,
		EnvControlplane: s.Controlplane,
		EnvOTel:         s.OTel,
	}
	if s.Policy.AnyHost {
		env[EnvAny] = "1"
	}
	if s.OTelInsecure {
		env[EnvOTelInsecure] = "1"
	}
	if s.Listen != "" {
		env[EnvListen] = s.Listen
	}
	if s.Control != "" {
		env[EnvControl] = s.Control
	}
	if len(s.Clients) > 0 {
		env[EnvClients] = joinPrefixes(s.Clients)
	}
	if len(s.Policy.HostAddrs) > 0 {
		env[EnvHostAddrs] = joinPrefixes(s.Policy.HostAddrs)
	}
	return env
}

func joinPrefixes(ps []netip.Prefix) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}

// parsePrefixes parses a comma-separated list of CIDRs (the environment's
// spelling), each masked.
func parsePrefixes(name, list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range split(list) {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("gate: %s: %w", name, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// FromEnv reads Settings from getenv, refusing malformed hosts, ranges or
// OTLP endpoint (CheckOTelEndpoint).
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{
		Session:      getenv(EnvSession),
		Token:        getenv(EnvToken),
		Controlplane: getenv(EnvControlplane),
		OTel:         getenv(EnvOTel),
		OTelInsecure: getenv(EnvOTelInsecure) == "1",
		Listen:       getenv(EnvListen),
		Control:      getenv(EnvControl),
	}
	if s.Listen != "" {
		if _, err := netip.ParseAddrPort(s.Listen); err != nil {
			return s, fmt.Errorf("gate: %s: %w", EnvListen, err)
		}
	}
	s.Policy.AnyHost = getenv(EnvAny) == "1"
	for _, h := range split(getenv(EnvAllow)) {
		if _, err := CanonicalHost(strings.TrimPrefix(h, "*.")); err != nil {
			return s, fmt.Errorf("gate: %s: %w", EnvAllow, err)
		}
		s.Policy.Allowed = append(s.Policy.Allowed, h)
	}
	var err error
	if s.Policy.Private, err = parsePrefixes(EnvPrivate, getenv(EnvPrivate)); err != nil {
		return s, err
	}
	if s.Policy.HostAddrs, err = parsePrefixes(EnvHostAddrs, getenv(EnvHostAddrs)); err != nil {
		return s, err
	}
	if s.Clients, err = parsePrefixes(EnvClients, getenv(EnvClients)); err != nil {
		return s, err
	}
	if s.OTel != "" {
		if _, err := CheckOTelEndpoint(s.OTel, s.OTelInsecure, s.Policy); err != nil {
			return s, fmt.Errorf("gate: %s: %w", EnvOTel, err)
		}
	}
	return s, nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
