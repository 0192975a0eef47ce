package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/defaults"
)

// Resolved is a Spec checked and with its defaults filled in: what every
// backend builds its sandbox from.
type Resolved struct {
	Workdir string   // Spec.Workdir or DefaultWorkdir
	Roots   []string // WritablePaths(Workdir)
	UID     int64    // Hardening.RunAsUser or the default user
	// Env is Spec.Env plus HOME (the workdir, writable, unlike the image's
	// idea of a home) and defaults.Env, each unless Spec.Env names it.
	Env          map[string]string
	CPUMillis    int64    // Hardening.CPUMillis or DefaultCPUMillis
	MemoryBytes  int64    // Hardening.MemoryBytes or the default, bytes
	PidsLimit    int64    // Hardening.PidsLimit or DefaultPidsLimit
	StorageBytes int64    // StorageBound(Hardening), bytes
	CapDrop      []string // Hardening.EffectiveCapDrop
	Runtime      string   // Spec.Runtime, its name checked; "" is the backend's default
}

// ErrInvalidSpec is what Resolve's refusal of a Spec matches where no more
// specific error says what is wrong (no image, a bad workdir). The others:
// domain.ErrInvalidID, domain.ErrInvalidNetworking, ErrInvalidGate,
// ErrInvalidEnv and ErrInvalidHardening.
var ErrInvalidSpec = errors.New("sandbox: invalid spec")

// Resolve checks spec the way every backend must before touching its
// engine (session ID, image named, networking and gate, workdir,
// environment, hardening, a read-only root) and fills in the defaults. The
// networking mode itself is the backend's to accept or refuse. Each refusal
// matches one of ErrInvalidSpec's list.
func Resolve(spec Spec) (Resolved, error) {
	if err := spec.SessionID.Validate(); err != nil {
		return Resolved{}, err
	}
	if spec.Image == "" {
		return Resolved{}, fmt.Errorf("%w: no image", ErrInvalidSpec)
	}
	if err := spec.Networking.Validate(); err != nil {
		return Resolved{}, err
	}
	if spec.Gate != nil && spec.Networking.Mode() != domain.NetLimited {
		return Resolved{}, fmt.Errorf("%w: a Gate is only meaningful with networking %q, not %q", ErrInvalidGate, domain.NetLimited, spec.Networking.Mode())
	}
	workdir := spec.Workdir
	if workdir == "" {
		workdir = DefaultWorkdir
	}
	if err := CheckPath(workdir); err != nil {
		return Resolved{}, fmt.Errorf("%w: workdir: %w", ErrInvalidSpec, err)
	}
	if err := ValidateEnv(spec.Env); err != nil {
		return Resolved{}, err
	}
	if err := domain.CheckRuntimeName(spec.Runtime); err != nil {
		return Resolved{}, fmt.Errorf("%w: %w", ErrRuntimeUnavailable, err)
	}
	h := spec.Hardening
	if err := h.Validate(spec.Gate != nil); err != nil {
		return Resolved{}, err
	}
	if !h.IsZero() && !h.ReadOnlyRootfs {
		return Resolved{}, fmt.Errorf("%w: hardening asks for a writable root; sandboxes always have a read-only root (set ReadOnlyRootfs, or leave Hardening zero for the defaults)", ErrInvalidHardening)
	}
	storage, err := StorageBound(h)
	if err != nil {
		return Resolved{}, err
	}
	r := Resolved{Workdir: workdir, Roots: WritablePaths(workdir), UID: defaultRunAsUser, CPUMillis: h.CPUMillis, MemoryBytes: h.MemoryBytes,
		PidsLimit: h.PidsLimit, StorageBytes: storage, CapDrop: h.EffectiveCapDrop(spec.Gate != nil), Runtime: spec.Runtime}
	if h.RunAsUser != nil {
		r.UID = *h.RunAsUser
	}
	if r.CPUMillis == 0 {
		r.CPUMillis = DefaultCPUMillis
	}
	if r.MemoryBytes == 0 {
		r.MemoryBytes = defaultMemoryBytes
	}
	if r.PidsLimit == 0 {
		r.PidsLimit = DefaultPidsLimit
	}
	r.Env = defaults.Env()
	r.Env["HOME"] = workdir
	maps.Copy(r.Env, spec.Env)
	return r, nil
}

// StorageBound is what h lets a sandbox write, in bytes: its
// EphemeralStorageBytes, at most half its memory limit, or when zero the
// smaller of DefaultEphemeralStorageBytes and that half. Backends keep the
// writable places in memory (tmpfs): with them full, the other half is what
// the sandbox's processes have, so a full disk is ENOSPC and not an
// out-of-memory kill of every command after it. More than half is
// ErrInvalidHardening.
func StorageBound(h Hardening) (int64, error) {
	mem := h.MemoryBytes
	if mem == 0 {
		mem = defaultMemoryBytes
	}
	switch max := mem / 2; {
	case h.EphemeralStorageBytes == 0:
		return min(DefaultEphemeralStorageBytes, max), nil
	case h.EphemeralStorageBytes > max:
		return 0, fmt.Errorf("%w: EphemeralStorageBytes %d above half the memory limit (%d): the writable places are kept in memory",
			ErrInvalidHardening, h.EphemeralStorageBytes, mem)
	default:
		return h.EphemeralStorageBytes, nil
	}
}

// SpecDigest digests what must match for Provision to adopt an existing
// sandbox: the image, the workdir, the networking (mode and allowed hosts,
// with network the backend's name for what it means, if any) and the
// storage bound of each writable root, in bytes, and the runtime
// (Spec.Runtime or the backend's default; "" is the engine's default, and
// leaves the digest as it was before runtimes could be asked). Backends
// record it on the sandbox and compare.
func SpecDigest(image, workdir string, n domain.Networking, network string, rootBytes int64, runtime string) string {
	hosts := make([]string, len(n.AllowedHosts))
	for i, h := range n.AllowedHosts {
		hosts[i] = strings.ToLower(h)
	}
	sort.Strings(hosts)
	s := sha256.Sum256([]byte(image + "\x00" + workdir + "\x00" + string(n.Mode()) + "\x00" + strings.Join(hosts, ",") +
		"\x00" + network + "\x00" + strconv.FormatInt(rootBytes, 10) + runtimeSuffix(runtime)))
	return hex.EncodeToString(s[:12])
}

// runtimeSuffix is what a runtime adds to SpecDigest's input: nothing for
// the default.
func runtimeSuffix(runtime string) string {
	if runtime == "" {
		return ""
	}
	return "\x00runtime=" + runtime
}
