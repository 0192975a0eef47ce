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
)

// Settings is what the gate's environment says.
type Settings struct {
	Policy       Policy
	Session      string
	Token        string
	Controlplane string
	OTel         string
	OTelInsecure bool
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
