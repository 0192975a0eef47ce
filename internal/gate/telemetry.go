package gate

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// ErrOTelEndpoint is what CheckOTelEndpoint's refusals match.
var ErrOTelEndpoint = errors.New("bad OTLP endpoint")

// maxEndpointBytes bounds an OTLP endpoint URL, in bytes.
const maxEndpointBytes = 2048

// OTLP/HTTP signal paths, appended to the endpoint (as the OTLP exporter
// specification does with OTEL_EXPORTER_OTLP_ENDPOINT).
const (
	TracesPath  = "/v1/traces"
	MetricsPath = "/v1/metrics"
)

// CheckOTelEndpoint validates an OTLP/HTTP endpoint: an absolute http or
// https URL with a host and an explicit port, no user information, query
// or fragment; http only with insecure set and https only without it (so
// the configuration says which one it means); an IP literal host must
// pass p.AllowAddr (never loopback or link-local, private only in
// p.Private). A host name is checked the same way at each dial
// (AddrDialer). The path, if any, is a prefix: the signals go to
// path+TracesPath and path+MetricsPath. It returns the URL without a
// trailing slash. Every refusal matches ErrOTelEndpoint (and ErrAddress
// for a refused address).
func CheckOTelEndpoint(raw string, insecure bool, p Policy) (*url.URL, error) {
	if len(raw) > maxEndpointBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrOTelEndpoint, maxEndpointBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Not echoed: it may hold a secret.
		return nil, fmt.Errorf("%w: not a URL", ErrOTelEndpoint)
	}
	// Messages name the URL without its user information.
	shown := *u
	shown.User = nil
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrOTelEndpoint, shown.String(), why)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, bad("want an http:// or https:// URL")
	case u.Scheme == "http" && !insecure:
		return nil, bad("plain http needs OTelInsecure")
	case u.Scheme == "https" && insecure:
		return nil, bad("OTelInsecure with an https URL: say http:// for plain HTTP")
	case u.Opaque != "" || u.Host == "":
		return nil, bad("no host")
	case u.User != nil:
		return nil, bad("credentials in the URL")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, bad("a query or fragment")
	}
	host, port := u.Hostname(), u.Port()
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return nil, bad("want an explicit port (OTLP/HTTP's is 4318)")
	}
	h, err := CanonicalHost(host)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOTelEndpoint, err)
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if err := p.AllowAddr(a); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrOTelEndpoint, err)
		}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}
