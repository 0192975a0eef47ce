package gate

import (
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
	EnvListen       = "STOCKADE_GATE_LISTEN"        // proxy address; "" for ListenAddr
	EnvControl      = "STOCKADE_GATE_CONTROL"       // control socket; "" for ControlSocket
)

// Settings is what the gate's environment says.
type Settings struct {
	Policy       Policy
	Session      string
	Token        string
	Controlplane string
	OTel         string
	OTelInsecure bool
	// Listen is the proxy's TCP address; "" means ListenAddr (every
	// interface). A gate sharing its network namespace with the sandbox
	// (sandbox/kubernetes) listens on loopback only.
	Listen string
	// Control is the control socket's address: a path, or "@name" for an
	// abstract socket; "" means ControlSocket. A gate sharing its network
	// namespace with the sandbox uses a path in a directory only the gate
	// container mounts: an abstract socket is reachable from the whole
	// network namespace.
	Control string
}

// ListenOr returns s.Listen, or ListenAddr when it is empty.
func (s Settings) ListenOr() string {
	if s.Listen == "" {
		return ListenAddr
	}
	return s.Listen
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
	priv := make([]string, len(s.Policy.Private))
	for i, p := range s.Policy.Private {
		priv[i] = p.String()
	}
	env := map[string]string{
		EnvAllow:        strings.Join(s.Policy.Allowed, ","),
		EnvPrivate:      strings.Join(priv, ","),
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
	return env
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
	for _, c := range split(getenv(EnvPrivate)) {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return s, fmt.Errorf("gate: %s: %w", EnvPrivate, err)
		}
		s.Policy.Private = append(s.Policy.Private, p.Masked())
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
