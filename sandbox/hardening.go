package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/stockade/stockade/domain"
)

// DefaultCapDrop is the capability drop list of a Hardening that names none:
// every capability.
var DefaultCapDrop = []string{"ALL"}

// gatedCapDrop are the capabilities a gated sandbox never keeps, whatever
// CapDrop says: with them it could rewrite the rules that send its traffic
// through the gate, or forge packets around them.
var gatedCapDrop = []string{"NET_ADMIN", "NET_RAW"}

// Hardening is a sandbox's confinement. A zero field takes its default,
// except ReadOnlyRootfs: see below.
type Hardening struct {
	// CPUMillis is the CPU limit in thousandths of a CPU; 0 means
	// DefaultCPUMillis, and at most MaxCPUMillis. Backends clamp it to what
	// the engine has.
	CPUMillis int64
	// MemoryBytes is the memory limit in bytes, without swap; 0 means 1 GiB.
	MemoryBytes int64
	// PidsLimit bounds processes and threads; 0 means DefaultPidsLimit.
	PidsLimit int64
	// EphemeralStorageBytes bounds what the sandbox may write to its
	// writable places (WritablePaths) together, in bytes; 0 means
	// DefaultEphemeralStorageBytes, and a set value is at least
	// MinEphemeralStorageBytes. A write past the bound fails in the sandbox
	// with ENOSPC. Backends document how they split it across the places,
	// and may bound it further (the Docker backend keeps it in memory, so
	// at most half the memory limit); one that cannot enforce a bound
	// refuses the Spec rather than ignore it.
	EphemeralStorageBytes int64
	// CapDrop lists the capabilities to drop ("ALL" or names such as
	// "NET_RAW", with or without "CAP_"); nil means DefaultCapDrop. A list
	// without "ALL" keeps the engine's default set minus the names.
	CapDrop []string
	// ReadOnlyRootfs mounts the root filesystem read-only, leaving only
	// WritablePaths writable. A zero Hardening means true (with every other
	// default); in a Hardening that sets anything, false asks for a writable
	// root, which a backend that cannot give one refuses.
	ReadOnlyRootfs bool
	// RunAsUser is the uid (and gid) commands run as; nil means 65534.
	// Backends refuse 0.
	RunAsUser *int64
}

// IsZero reports whether h is the zero Hardening, which stands for every
// default (see the package documentation); a Hardening that sets anything,
// even to its default value, is not zero and is taken as written.
func (h Hardening) IsZero() bool {
	return h.CPUMillis == 0 && h.MemoryBytes == 0 && h.PidsLimit == 0 && h.EphemeralStorageBytes == 0 &&
		h.CapDrop == nil && !h.ReadOnlyRootfs && h.RunAsUser == nil
}

// Environment variables HardeningFromEnv reads.
const (
	envCPUMillis        = "STOCKADE_SANDBOX_CPU_MILLIS"
	envMemoryBytes      = "STOCKADE_SANDBOX_MEMORY_BYTES"
	envPidsLimit        = "STOCKADE_SANDBOX_PIDS_LIMIT"
	envEphemeralStorage = "STOCKADE_SANDBOX_EPHEMERAL_STORAGE_BYTES"
	envCapDrop          = "STOCKADE_SANDBOX_CAP_DROP"
	envReadOnlyRootfs   = "STOCKADE_SANDBOX_READONLY_ROOTFS"
	envRunAsUser        = "STOCKADE_SANDBOX_RUN_AS_USER"
)

// HardeningFromEnv returns the defaults, each overridden by its variable
// when set and non-empty: STOCKADE_SANDBOX_CPU_MILLIS,
// STOCKADE_SANDBOX_MEMORY_BYTES, STOCKADE_SANDBOX_PIDS_LIMIT,
// STOCKADE_SANDBOX_EPHEMERAL_STORAGE_BYTES (integers),
// STOCKADE_SANDBOX_CAP_DROP (comma-separated names),
// STOCKADE_SANDBOX_READONLY_ROOTFS (a strconv.ParseBool boolean) and
// STOCKADE_SANDBOX_RUN_AS_USER (a uid). The result is checked with
// Validate(false). With none set it is CPUMillis DefaultCPUMillis,
// MemoryBytes 1 GiB, PidsLimit DefaultPidsLimit, CapDrop DefaultCapDrop,
// ReadOnlyRootfs true and RunAsUser 65534.
func HardeningFromEnv() (Hardening, error) {
	return hardeningFrom(os.Getenv)
}

func hardeningFrom(getenv func(string) string) (Hardening, error) {
	uid := int64(defaultRunAsUser)
	h := Hardening{
		CPUMillis:      DefaultCPUMillis,
		MemoryBytes:    defaultMemoryBytes,
		PidsLimit:      DefaultPidsLimit,
		CapDrop:        append([]string(nil), DefaultCapDrop...),
		ReadOnlyRootfs: true,
		RunAsUser:      &uid,
	}
	ints := []struct {
		name string
		dst  *int64
	}{
		{envCPUMillis, &h.CPUMillis},
		{envMemoryBytes, &h.MemoryBytes},
		{envPidsLimit, &h.PidsLimit},
		{envEphemeralStorage, &h.EphemeralStorageBytes},
		{envRunAsUser, h.RunAsUser},
	}
	for _, v := range ints {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Hardening{}, fmt.Errorf("sandbox: %s=%q: not an integer", v.name, s)
		}
		*v.dst = n
	}
	if s := getenv(envCapDrop); s != "" {
		h.CapDrop = nil
		for _, c := range strings.Split(s, ",") {
			if c = strings.TrimSpace(c); c != "" {
				h.CapDrop = append(h.CapDrop, c)
			}
		}
	}
	if s := getenv(envReadOnlyRootfs); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return Hardening{}, fmt.Errorf("sandbox: %s=%q: not a boolean", envReadOnlyRootfs, s)
		}
		h.ReadOnlyRootfs = b
	}
	if err := h.Validate(false); err != nil {
		return Hardening{}, err
	}
	return h, nil
}

// EffectiveCapDrop returns the capabilities to drop, upper-case without the
// "CAP_" prefix and without duplicates: CapDrop, or DefaultCapDrop when it is
// nil, plus NET_ADMIN and NET_RAW when the sandbox is gated (unless ALL is
// dropped already).
func (h Hardening) EffectiveCapDrop(gated bool) []string {
	src := h.CapDrop
	if src == nil {
		src = DefaultCapDrop
	}
	var out []string
	seen := map[string]bool{}
	add := func(c string) {
		c = normCap(c)
		if c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for _, c := range src {
		add(c)
	}
	if gated && !seen["ALL"] {
		for _, c := range gatedCapDrop {
			add(c)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func normCap(c string) string {
	c = strings.ToUpper(strings.TrimSpace(c))
	return strings.TrimPrefix(c, "CAP_")
}

// Bounds of what a sandbox writes, in bytes.
const (
	// DefaultEphemeralStorageBytes is the storage bound of a Hardening that
	// sets none: 512 MiB, half the default memory limit, since the Docker
	// backend keeps the writable places in memory.
	DefaultEphemeralStorageBytes = 512 << 20
	// MinEphemeralStorageBytes is the smallest bound Validate accepts:
	// 1 MiB, room for the backend's staging of file writes.
	MinEphemeralStorageBytes = 1 << 20
)

// MaxCPUMillis is the largest CPUMillis: the most whose nano-CPUs
// (CPUMillis * 1e6, what engines take) fit in an int64.
const MaxCPUMillis = math.MaxInt64 / 1_000_000

// Bounds Validate enforces.
const (
	minMemoryBytes = 16 << 20 // below this even the backend's scripts fail
	minPidsLimit   = 16       // room for the backend's scripts and killer
	maxUID         = 1<<31 - 2
)

// ErrInvalidGate is what a backend's refusal of a malformed GateSpec
// matches.
var ErrInvalidGate = errors.New("sandbox: invalid gate spec")

// ErrInvalidHardening is what Validate's refusals match.
var ErrInvalidHardening = errors.New("sandbox: invalid hardening")

// Validate checks h: no negative limit, a CPUMillis of at most
// MaxCPUMillis, a memory limit of at least 16 MiB and a pids limit of at
// least 16 when set, capability names made of letters, digits and '_', and a
// RunAsUser between 1 and 2^31-2 (root is refused: the hardening assumes an
// unprivileged user). gated says whether the sandbox uses the egress gate; a
// gated sandbox must run with a read-only root so it cannot alter the gate's
// configuration files. Every refusal matches ErrInvalidHardening.
func (h Hardening) Validate(gated bool) error {
	if err := h.check(gated); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidHardening, err)
	}
	return nil
}

// check is Validate's reasons, as plain text.
func (h Hardening) check(gated bool) error {
	switch {
	case h.CPUMillis < 0:
		return fmt.Errorf("negative CPUMillis %d", h.CPUMillis)
	case h.CPUMillis > MaxCPUMillis:
		return fmt.Errorf("CPUMillis %d above the maximum %d (its nano-CPUs overflow)", h.CPUMillis, int64(MaxCPUMillis))
	case h.MemoryBytes < 0:
		return fmt.Errorf("negative MemoryBytes %d", h.MemoryBytes)
	case h.MemoryBytes > 0 && h.MemoryBytes < minMemoryBytes:
		return fmt.Errorf("MemoryBytes %d below the minimum %d", h.MemoryBytes, minMemoryBytes)
	case h.PidsLimit < 0:
		return fmt.Errorf("negative PidsLimit %d", h.PidsLimit)
	case h.PidsLimit > 0 && h.PidsLimit < minPidsLimit:
		return fmt.Errorf("PidsLimit %d below the minimum %d", h.PidsLimit, minPidsLimit)
	case h.EphemeralStorageBytes < 0:
		return fmt.Errorf("negative EphemeralStorageBytes %d", h.EphemeralStorageBytes)
	case h.EphemeralStorageBytes > 0 && h.EphemeralStorageBytes < MinEphemeralStorageBytes:
		return fmt.Errorf("EphemeralStorageBytes %d below the minimum %d", h.EphemeralStorageBytes, MinEphemeralStorageBytes)
	case h.RunAsUser != nil && *h.RunAsUser == 0:
		return fmt.Errorf("RunAsUser 0: sandboxes never run as root")
	case h.RunAsUser != nil && (*h.RunAsUser < 0 || *h.RunAsUser > maxUID):
		return fmt.Errorf("RunAsUser %d out of range", *h.RunAsUser)
	case gated && !h.IsZero() && !h.ReadOnlyRootfs:
		return fmt.Errorf("a gated sandbox needs a read-only root")
	}
	for _, c := range h.CapDrop {
		n := normCap(c)
		if n == "" {
			return fmt.Errorf("empty capability name in CapDrop")
		}
		for i := 0; i < len(n); i++ {
			ch := n[i]
			if !(ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_') {
				return fmt.Errorf("invalid capability name %q", c)
			}
		}
	}
	return nil
}

// GateSpec configures the egress gate a NetLimited sandbox sends its traffic
// through: a per-session HTTP forward proxy (plain HTTP and CONNECT, reached
// through the HTTP_PROXY and HTTPS_PROXY the backend sets) that admits only
// requests to Networking.AllowedHosts, resolves names itself, refuses
// loopback, link-local and private destinations, records every attempt,
// and authenticates to the control plane with a per-session token. The
// zero value is a gate of Stockade's own image without a control plane.
type GateSpec struct {
	// ControlplaneURL, when set, is where the gate fetches the session's
	// credentials at start, authenticating with the session's token (GET,
	// "Authorization: Bearer <token>"; see internal/gate for the answer's
	// shape). The gate substitutes each credential's placeholder in the
	// header values of plain-HTTP requests to the hosts the credential
	// names; HTTPS stays an opaque tunnel. A gate whose fetch fails does
	// not start, and Provision fails. "" means none.
	ControlplaneURL string
	// Image is the gate's image, which must already be present and run
	// /usr/local/bin/stockade-gate; "" means Stockade's own gate image,
	// which the backend builds on first use from cmd/stockade-gate.
	Image string
	// OTelEndpoint is the OTLP/HTTP (protobuf) base URL the gate exports
	// to: a span per request and counters, to OTelEndpoint+"/v1/traces"
	// and +"/v1/metrics" (names and units: internal/gate's documentation,
	// docs/design/gate.md). It must be an http or https URL with a host and
	// an explicit port and no credentials, query or fragment; its
	// addresses obey the gate's address rules (never loopback or
	// link-local; private only as the backend admits). The gate reaches it
	// over its own outside network, not through its policy. Export never
	// delays a request: what a slow or dead collector cannot take is
	// dropped. "" sends none. A bad one is refused with ErrInvalidGate;
	// backends that cannot export refuse a non-empty one.
	OTelEndpoint string
	// OTelInsecure sends telemetry without TLS; it is required for an
	// http:// OTelEndpoint and refused with an https:// one.
	OTelInsecure bool
	// TokenMinter makes and records the session's gate token: the
	// Provision that creates the gate calls Generate before the create and
	// Persist only after its create won (before the gate starts); a
	// concurrent loser's token is dropped, and adopting an existing gate
	// persists nothing. Nil gives the gate no token.
	TokenMinter GateTokenMinter
}

// GateTokenMinter makes a session's gate token and records it where the
// control plane can check it.
type GateTokenMinter interface {
	// Generate returns a new, unguessable token.
	Generate() string
	// Persist records token as the session's, before the gate uses it.
	Persist(ctx context.Context, sessionID domain.ID, token string) error
}

// GateTokenRevoker revokes a session's gate token, so a sandbox that outlives
// its session cannot use the gate.
type GateTokenRevoker interface {
	Revoke(ctx context.Context, sessionID domain.ID) error
}

// Revokers is a backend's record of which GateTokenRevoker revokes each
// session's token: the one its Spec named when this process provisioned
// it, else the backend's default (its Config's). The zero value has no
// default and is ready to use; it is safe for concurrent use.
type Revokers struct {
	// Default revokes sessions this process did not provision; nil means
	// none.
	Default GateTokenRevoker

	mu   sync.Mutex
	byID map[domain.ID]GateTokenRevoker
}

// Remember records r (when not nil) as the revoker of id.
func (rs *Revokers) Remember(id domain.ID, r GateTokenRevoker) {
	if r == nil {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.byID == nil {
		rs.byID = map[domain.ID]GateTokenRevoker{}
	}
	rs.byID[id] = r
}

// Revoke revokes id's token with its revoker, if one is known; a failure
// is the revoker's error, and the caller removes nothing.
func (rs *Revokers) Revoke(ctx context.Context, id domain.ID) error {
	rs.mu.Lock()
	r := rs.byID[id]
	rs.mu.Unlock()
	if r == nil {
		r = rs.Default
	}
	if r == nil {
		return nil
	}
	return r.Revoke(ctx, id)
}

// Forget drops id's revoker once its session is gone.
func (rs *Revokers) Forget(id domain.ID) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.byID, id)
}
