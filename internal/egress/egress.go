// Package egress is the one topology that puts containers behind an
// egress gate (cmd/stockade-gate, logic in internal/gate), shared by both
// faces: sandbox/docker's NetLimited sessions and internal/toolchain's
// networked profiles (acquire, mutate, tool).
//
// # Topology
//
// A gated container sits on a gate network of its own: an internal bridge
// (the engine drops every packet that would leave it) with
// InhibitOption=true (the host's end of the bridge gets no address, so
// there is no gateway: nothing on the network reaches the host, which an
// internal network alone still lets through), on a /SubnetBits of a
// subnet pool that FreeSubnet allocates (the engine's default pools run
// out after about 30 networks). Its only other member is the gate, which
// is also attached to one outside network, its one way out. The gated
// container reaches the gate by its alias (Alias) through the engine's
// embedded DNS, which on an internal network answers only for the
// network's members, and gets the proxy variables ProxyEnv names. A
// network the engine did not keep that way (Podman does not keep
// inhibit_ipv4) is ErrNotIsolated.
//
// The gate serves the gate network only (SettingsOn: its clients are that
// subnet; it listens there and closes any other connection), so whatever
// else is on its outside network cannot use it; and it refuses the engine
// host's addresses (HostAddrs), which a name may lead to from the outside
// network as easily as any other.
//
// # Lifecycle
//
// EnsureNetwork makes (or checks) a gate network; Launch creates, connects
// and starts a gate container of a spec (container.GateSpec or
// container.ToolchainGateSpec); WaitReady waits until `stockade-gate
// ready` answers; ReadLog reads the record through `stockade-gate log`
// (an exec: the record is reachable from nothing on any network).
// sandbox/docker calls these one at a time, around its tokens and
// adoption; Start and Gate do the whole of it for a gate that lives as
// long as one toolchain run, and read its record phase by phase (Take).
package egress

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Alias is the gate's DNS name on its gate network, in the gated
// container's proxy variables.
const Alias = "stockade-gate"

// Address is the gate's fixed address on its gate network subnet: the
// last address before the broadcast (a /28's .14), which the engine, that
// hands out addresses from the bottom, gives no container behind it. A
// gated container finds the gate there through a line of its /etc/hosts
// (HostsLine), not through the engine's DNS: under gVisor the container's
// own network stack never reaches the engine's resolver at 127.0.0.11.
func Address(subnet netip.Prefix) netip.Addr {
	a := subnet.Masked().Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n += 1<<(32-subnet.Bits()) - 2
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// HostsLine is the /etc/hosts line ("name:address", as the engine's
// ExtraHosts take it) by which a gated container finds its gate at addr.
func HostsLine(addr netip.Addr) string { return Alias + ":" + addr.String() }

// SubnetBits is the prefix length of a gate network: 16 addresses, of
// which the network, broadcast and (unassigned) gateway addresses leave 13
// for the gate and the containers behind it.
const SubnetBits = 28

// InhibitOption is the bridge driver option that leaves the host's end of
// the bridge without an IPv4 address.
const InhibitOption = "com.docker.network.bridge.inhibit_ipv4"

// DefaultPool is the IPv4 range gate networks (and sandbox/docker's
// owners' networks) take their subnets from when none is configured.
const DefaultPool = "10.213.0.0/16"

// Budgets of a gate's lifecycle.
const (
	// ReadyBudget bounds the wait for a started gate to answer ready.
	ReadyBudget = 30 * time.Second
	// CommandTimeout bounds one `stockade-gate ready|log` exec.
	CommandTimeout = 15 * time.Second
	// MaxLogBytes bounds the record ReadLog reads, in bytes: the gate
	// keeps gate.DefaultLogRecords records of a few hundred bytes, each
	// under 4 KiB with every field at gate.MaxFieldBytes
	// (TestMaxLogBytesHoldsAFullLog), so a full log always fits.
	MaxLogBytes = 8 << 20
	// NetworkRounds bounds how often EnsureNetwork (and sandbox/docker's
	// owner network) looks for a network and tries to create it while
	// another create holds the name or the subnet (the engine refuses the
	// name before it lists the network); the waits between rounds add up
	// to about 16 s.
	NetworkRounds = 40
	// removeBudget bounds each removal of Gate.Close.
	removeBudget = 30 * time.Second
)

var (
	// ErrGateDown reports a gate that is not running (or not there): what
	// is behind it reaches nothing.
	ErrGateDown = errors.New("egress gate is not running")
	// ErrNotIsolated reports a gate network the engine did not keep
	// internal with InhibitOption=true: containers on it could reach the
	// host past their gate (Podman).
	ErrNotIsolated = errors.New("egress: the engine did not keep the gate network internal and without a gateway")
)

// Engine is the part of the engine client the gate topology uses;
// *dockerapi.Client implements it.
type Engine interface {
	container.ExecEngine
	ContainerCreate(ctx context.Context, name string, cfg dockerapi.ContainerConfig) (string, error)
	ContainerStart(ctx context.Context, id string) error
	ContainerInspect(ctx context.Context, id string) (dockerapi.ContainerJSON, error)
	ContainerRemove(ctx context.Context, id string, opts dockerapi.RemoveOptions) error
	NetworkCreate(ctx context.Context, n dockerapi.NetworkCreate) (string, error)
	NetworkList(ctx context.Context, filters dockerapi.Filters) ([]dockerapi.Network, error)
	NetworkRemove(ctx context.Context, id string) error
	NetworkConnect(ctx context.Context, network, container string, aliases ...string) error
}

// NetworkLister lists networks; FreeSubnet needs nothing else.
type NetworkLister interface {
	NetworkList(ctx context.Context, filters dockerapi.Filters) ([]dockerapi.Network, error)
}

// ProxyEnv is what a gated container's environment gets: both spellings
// of the proxy variables (curl reads only the lower-case http_proxy; the
// go command reads either), pointing at the gate's Alias.
func ProxyEnv() map[string]string { return ProxyEnvAt(proxyHostPort) }

// FreeSubnet returns a subnet of bits of pool that no network of the
// engine overlaps, starting at the slot the hash of seed names (so
// different seeds spread).
func FreeSubnet(ctx context.Context, eng NetworkLister, pool netip.Prefix, bits int, seed string) (netip.Prefix, error) {
	if !pool.Addr().Is4() || bits < pool.Bits() || bits > 32 {
		return netip.Prefix{}, fmt.Errorf("egress: no /%d in subnet pool %s", bits, pool)
	}
	ns, err := eng.NetworkList(ctx, nil)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("egress: list networks: %w", err)
	}
	var used []netip.Prefix
	for _, n := range ns {
		for _, c := range n.IPAM.Config {
			if u, err := netip.ParsePrefix(c.Subnet); err == nil {
				used = append(used, u)
			}
		}
	}
	slots := uint32(1) << (bits - pool.Bits())
	h := sha256.Sum256([]byte(seed))
	first := binary.BigEndian.Uint32(h[:4]) % slots
	base := binary.BigEndian.Uint32(pool.Addr().AsSlice())
	for i := uint32(0); i < slots; i++ {
		slot := (first + i) % slots
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], base+slot<<(32-bits))
		cand := netip.PrefixFrom(netip.AddrFrom4(a), bits)
		free := true
		for _, u := range used {
			if u.Overlaps(cand) {
				free = false
				break
			}
		}
		if free {
			return cand, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("egress: every /%d of subnet pool %s is taken", bits, pool)
}

// HostAddrs returns the addresses of the engine's host that gates refuse
// (gate.Policy.HostAddrs), each as a one-address prefix, sorted: the
// gateway of every bridge network of the engine (the host's address on
// that bridge; a bridge that names none, the first address of its
// subnet), every address of this machine's interfaces (the engine's host
// when the engine is local), and the addresses of the host of engineHost,
// the engine's address as its client dials it ("tcp://host:port"; a
// "unix://" one adds nothing). Loopback, link-local and multicast
// addresses are left out: the gate refuses them anyway.
//
// A remote engine's host may have addresses none of these names (an
// interface the client does not dial, in no bridge): the gate then
// refuses it only if it is private and outside the admitted ranges. The
// list is what holds when the gate is launched: a bridge made later is
// not in it.
func HostAddrs(ctx context.Context, eng NetworkLister, engineHost string) ([]netip.Prefix, error) {
	var addrs []netip.Addr
	ns, err := eng.NetworkList(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("egress: the host's addresses: list networks: %w", err)
	}
	for _, n := range ns {
		if n.Driver != "bridge" {
			continue
		}
		for _, c := range n.IPAM.Config {
			if gw, err := parseAddrOrPrefix(c.Gateway); err == nil {
				addrs = append(addrs, gw)
			} else if sub, err := netip.ParsePrefix(c.Subnet); err == nil && c.Gateway == "" {
				addrs = append(addrs, sub.Masked().Addr().Next())
			}
		}
	}
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("egress: the host's addresses: %w", err)
	}
	for _, a := range ifs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			addrs = append(addrs, p.Addr())
		}
	}
	if rest, ok := strings.CutPrefix(engineHost, "tcp://"); ok {
		h, _, err := net.SplitHostPort(rest)
		if err != nil {
			h = rest
		}
		as, err := net.DefaultResolver.LookupNetIP(ctx, "ip", strings.Trim(h, "[]"))
		if err != nil {
			return nil, fmt.Errorf("egress: the engine host's addresses: %w", err)
		}
		addrs = append(addrs, as...)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		a = a.Unmap()
		if !a.IsValid() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() {
			continue
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return slices.Compact(out), nil
}

// SettingsOn returns s for a gate whose session side is the gate network
// of subnet (EnsureNetwork's): its clients are that subnet
// (gate.Settings.Clients: nothing on its outside network is served), and
// it refuses the engine host's addresses (HostAddrs, with engineHost)
// besides any s names.
func SettingsOn(ctx context.Context, eng NetworkLister, engineHost string, s gate.Settings, subnet netip.Prefix) (gate.Settings, error) {
	host, err := HostAddrs(ctx, eng, engineHost)
	if err != nil {
		return s, err
	}
	s.Clients = []netip.Prefix{subnet}
	s.Policy.HostAddrs = append(slices.Clone(s.Policy.HostAddrs), host...)
	return s, nil
}

// parseAddrOrPrefix parses an address, alone or with a prefix length.
func parseAddrOrPrefix(s string) (netip.Addr, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr(), nil
	}
	return netip.ParseAddr(s)
}

// FindNetwork returns the network named name, or an error matching
// dockerapi.ErrNotFound. The engine's name filter matches substrings, so
// the name is compared here.
func FindNetwork(ctx context.Context, eng NetworkLister, name string) (dockerapi.Network, error) {
	ns, err := eng.NetworkList(ctx, dockerapi.Filters{"name": {name}})
	if err != nil {
		return dockerapi.Network{}, fmt.Errorf("egress: list networks: %w", err)
	}
	for _, n := range ns {
		if n.Name == name {
			return n, nil
		}
	}
	return dockerapi.Network{}, fmt.Errorf("egress: network %s: %w", name, dockerapi.ErrNotFound)
}

// NetworkSpec is a gate network to make.
type NetworkSpec struct {
	Name   string            // the network's name
	Labels map[string]string // what it carries; an existing one must carry them
	Pool   netip.Prefix      // where its /SubnetBits comes from
	Seed   string            // FreeSubnet's seed
}

// EnsureNetwork makes sure the gate network s exists and isolates as it
// must, creating it if needed, and returns its subnet (the gate's clients'
// range, gate.Settings.Clients); created says this call made it.
// Concurrent calls converge. A network of that name without s's labels,
// or without one IPv4 subnet, is refused; one the engine did not keep
// internal with InhibitOption is ErrNotIsolated.
func EnsureNetwork(ctx context.Context, eng Engine, s NetworkSpec) (subnet netip.Prefix, created bool, err error) {
	for round := 0; round < NetworkRounds; round++ {
		n, err := FindNetwork(ctx, eng, s.Name)
		if err == nil {
			if !label.Has(n.Labels, s.Labels) || n.Driver != "bridge" {
				return subnet, created, fmt.Errorf("egress: network %s exists but is not this gate's network; refusing to use it", s.Name)
			}
			if !n.Internal || n.Options[InhibitOption] != "true" {
				return subnet, created, fmt.Errorf("egress: network %s: %s=true was not kept: %w", s.Name, InhibitOption, ErrNotIsolated)
			}
			if len(n.IPAM.Config) != 1 {
				return subnet, created, fmt.Errorf("egress: network %s has %d subnets; want the one it was made with", s.Name, len(n.IPAM.Config))
			}
			if subnet, err = netip.ParsePrefix(n.IPAM.Config[0].Subnet); err != nil || !subnet.Addr().Is4() {
				return netip.Prefix{}, created, fmt.Errorf("egress: network %s: subnet %q is not an IPv4 range", s.Name, n.IPAM.Config[0].Subnet)
			}
			return subnet.Masked(), created, nil
		}
		if !errors.Is(err, dockerapi.ErrNotFound) {
			return subnet, created, err
		}
		free, err := FreeSubnet(ctx, eng, s.Pool, SubnetBits, s.Seed)
		if err != nil {
			return subnet, created, err
		}
		_, err = eng.NetworkCreate(ctx, dockerapi.NetworkCreate{
			Name:           s.Name,
			Driver:         "bridge",
			Internal:       true,
			Labels:         s.Labels,
			Options:        map[string]string{InhibitOption: "true"},
			IPAM:           &dockerapi.IPAM{Config: []dockerapi.IPAMConfig{{Subnet: free.String()}}},
			CheckDuplicate: true,
		})
		switch {
		case err == nil:
			created = true
			continue // check what the engine made
		case errors.Is(err, dockerapi.ErrConflict), errors.Is(err, dockerapi.ErrForbidden):
			// The name (another create) or the subnet (another network)
			// went meanwhile: look again.
			if err := container.Sleep(ctx, time.Duration(round+1)*20*time.Millisecond); err != nil {
				return subnet, created, fmt.Errorf("egress: create network %s: %w", s.Name, err)
			}
		default:
			return subnet, created, fmt.Errorf("egress: create network %s: %w", s.Name, err)
		}
	}
	return subnet, created, fmt.Errorf("egress: create network %s: still taken, or no free /%d in %s, after %d rounds", s.Name, SubnetBits, s.Pool, NetworkRounds)
}

// RemoveNetwork removes the network named name if it is there and carries
// labels; one without them is not ours and stays. The engine refuses to
// remove a network a container still uses (dockerapi.ErrForbidden or
// ErrConflict).
func RemoveNetwork(ctx context.Context, eng Engine, name string, labels map[string]string) error {
	n, err := FindNetwork(ctx, eng, name)
	if errors.Is(err, dockerapi.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !label.Has(n.Labels, labels) {
		return nil
	}
	err = eng.NetworkRemove(ctx, n.ID)
	if err == nil || errors.Is(err, dockerapi.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("egress: remove network %s: %w", name, err)
}

// NetworkReaper is what RemoveNetworks needs.
type NetworkReaper interface {
	NetworkLister
	NetworkRemove(ctx context.Context, id string) error
}

// RemoveNetworks removes every network carrying labels (the engine filters
// by them; label.Has checks again) and returns how many it removed. A
// network a container still uses is an error.
func RemoveNetworks(ctx context.Context, eng NetworkReaper, labels map[string]string) (int, error) {
	ns, err := eng.NetworkList(ctx, dockerapi.LabelsFilter(labels))
	if err != nil {
		return 0, fmt.Errorf("egress: list networks: %w", err)
	}
	n := 0
	var errs []error
	for _, nw := range ns {
		if !label.Has(nw.Labels, labels) {
			continue
		}
		err := eng.NetworkRemove(ctx, nw.ID)
		switch {
		case err == nil:
			n++
		case errors.Is(err, dockerapi.ErrNotFound):
		default:
			errs = append(errs, fmt.Errorf("egress: remove network %s: %w", nw.Name, err))
		}
	}
	return n, errors.Join(errs...)
}

// Launch creates the gate container name from spec (on its gate network,
// spec.Network, with Alias among spec.Aliases), runs beforeStart (when not
// nil) once the create won, connects it to the outside network out and
// starts it. cid is the container's ID once it was created, also when a
// later step failed (the caller removes it); a create that lost the name
// matches dockerapi.ErrConflict with cid empty. Launch does not wait for
// the gate to be ready (WaitReady).
func Launch(ctx context.Context, eng Engine, name string, spec container.Spec, out string, beforeStart func(ctx context.Context, cid string) error) (cid string, err error) {
	cfg, err := spec.Config()
	if err != nil {
		return "", fmt.Errorf("egress: %w", err)
	}
	cid, err = eng.ContainerCreate(ctx, name, cfg)
	switch {
	case errors.Is(err, dockerapi.ErrNotFound):
		return "", fmt.Errorf("egress: create gate %s (is gate image %q present? gates are never pulled): %w", name, spec.Image, err)
	case err != nil:
		return "", fmt.Errorf("egress: create %s: %w", name, err)
	}
	if beforeStart != nil {
		if err := beforeStart(ctx, cid); err != nil {
			return cid, err
		}
	}
	if err := eng.NetworkConnect(ctx, out, cid); err != nil {
		return cid, fmt.Errorf("egress: connect gate %s to network %s: %w", name, out, err)
	}
	if err := eng.ContainerStart(ctx, cid); err != nil {
		return cid, fmt.Errorf("egress: start gate %s: %w", name, err)
	}
	return cid, nil
}

// Command runs `stockade-gate cmd` in the gate container cid, keeping at
// most outCap bytes of each stream.
func Command(ctx context.Context, eng container.ExecEngine, cid, cmd string, outCap int64, log *slog.Logger) (container.Result, error) {
	return container.Exec(ctx, eng, cid, container.ExecSpec{
		Argv: []string{gate.Program, cmd}, Timeout: CommandTimeout, OutputCap: outCap,
		// A gate command that hangs means a broken gate: killing it
		// fails closed.
		Policy: container.KillContainer, Logger: log,
	})
}

// WaitReady waits, at most ReadyBudget, until the gate cid answers ready.
// A gate that exits first (a bad configuration, a control plane that
// refused it) is ErrGateDown at once.
func WaitReady(ctx context.Context, eng Engine, cid, name string, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyBudget)
	defer cancel()
	for i := 0; ; i++ {
		res, err := Command(ctx, eng, cid, gate.CmdReady, 4096, log)
		if err == nil && res.ExitCode == 0 && strings.TrimSpace(string(res.Stdout)) == "ok" {
			return nil
		}
		c, ierr := eng.ContainerInspect(ctx, cid)
		if ierr == nil && !c.State.Running && c.State.Status != "created" && c.State.Status != "restarting" {
			return fmt.Errorf("egress: gate %s %s (exit status %d) before it was ready: %w", name, c.State.Status, c.State.ExitCode, ErrGateDown)
		}
		if err := container.Sleep(ctx, time.Duration(min(i+1, 10))*20*time.Millisecond); err != nil {
			return fmt.Errorf("egress: gate %s not ready after %v (last: %v): %w", name, ReadyBudget, errors.Join(err, ierr), ErrGateDown)
		}
	}
}

// ReadLog reads the record of the running gate cid: its records oldest
// first, and how many older ones its bound dropped.
func ReadLog(ctx context.Context, eng container.ExecEngine, cid, name string, log *slog.Logger) (gate.LogDump, error) {
	var dump gate.LogDump
	res, err := Command(ctx, eng, cid, gate.CmdLog, MaxLogBytes, log)
	if err != nil {
		return dump, fmt.Errorf("egress: read the record of %s: %w", name, err)
	}
	if res.ExitCode != 0 || res.Truncated() {
		return dump, fmt.Errorf("egress: read the record of %s: exit status %d, truncated %v: %s", name, res.ExitCode, res.Truncated(), res.Stderr)
	}
	if err := json.Unmarshal(res.Stdout, &dump); err != nil {
		return dump, fmt.Errorf("egress: read the record of %s: %w", name, err)
	}
	return dump, nil
}

// Record is one request a gate saw.
type Record = domain.EgressRecord

// ProxyEnvAt is what a gated container's environment gets when its gate
// is at hostport ("host:port"): both spellings of the proxy variables
// (curl reads only the lower-case http_proxy; the go command reads either).
func ProxyEnvAt(hostport string) map[string]string {
	u := "http://" + hostport
	return map[string]string{"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u}
}

// proxyHostPort is the gate's address on a gate network.
var proxyHostPort = Alias + ":" + strconv.Itoa(gate.Port)
