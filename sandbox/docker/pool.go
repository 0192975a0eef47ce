package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// The warm pool (Config.Pool). A member is what a Provision of a pooled
// spec would make, made before any session asks: volumes, a keeper, and a
// started sandbox container with its agent running, all labelled with the
// owner, Kind=session, a Role (RolePool, RolePoolKeeper) and the member's
// token (label.Pool), and no session. A Provision whose spec resolves to a
// member's key claims one by renaming its sandbox container to the
// session's deterministic name: the engine's rename is atomic, so a
// concurrent Provision of the same session (here or in another process)
// either loses its create to the renamed container and adopts it, or wins
// the name and the rename fails (the member, untouched, goes back to the
// pool). Labels cannot change after create: the name is the record of whose
// a claimed container is (claimedSession), and the token leads from it to
// its keeper and volumes, which keep their member names. Members are
// handed out only by the process that made them, one claim each; a claimed
// member is never handed out again.

// PoolConfig configures the warm pool. The zero value (no Specs or Size
// zero) means no pool: every Provision creates its sandbox as without one.
type PoolConfig struct {
	// Specs are the specs kept warm (their SessionID and GateTokenRevoker
	// are ignored). A Provision claims a member of the spec that resolves
	// to the same container as its own but for the session: the same
	// image, workdir, Env, Hardening and Networking. Only NetNone specs
	// can be pooled (New refuses others with ErrUnpoolable): a
	// NetLimited or gated session's container is created on a network of
	// its own beside a gate made with that session's token, and a
	// NetUnrestricted one on the owner's network, whose lifetime follows
	// the owner's sessions (a member would hold it, or lose it to the Reap
	// of the last session). Other specs take the normal path.
	Specs []sandbox.Spec
	// Size is how many ready members each spec keeps; zero means no pool.
	Size int
	// MaxMembers bounds the members of the provider, ready or being made,
	// over all specs; zero means Size × len(Specs).
	MaxMembers int
	// MemoryBytes bounds the sum of the members' memory limits (each its
	// sandbox's Hardening.MemoryBytes or the default, plus its keeper's),
	// in bytes; zero means no bound besides MaxMembers. What a member uses
	// while idle is far less (a sleep and the agent); the bound is on what
	// the engine would let them take.
	MemoryBytes int64
}

// ErrUnpoolable reports a PoolConfig spec that cannot be kept warm.
var ErrUnpoolable = errors.New("docker: spec cannot be pooled")

// Bounds of the pool's background work.
const (
	// poolFillBudget bounds making one member (volumes, keeper, sandbox,
	// agent).
	poolFillBudget = 2 * time.Minute
	// poolRetryDelay is the wait after a member could not be made before
	// that spec's next try; it doubles with each failure in a row up to
	// poolRetryMax.
	poolRetryDelay = time.Second
	poolRetryMax   = time.Minute
	// poolSessionID stands for the session while a member's spec is
	// resolved; nothing made carries it.
	poolSessionID = domain.ID("pool")
)

// check validates c at New.
func (c PoolConfig) check() error {
	if c.Size < 0 || c.MaxMembers < 0 || c.MemoryBytes < 0 {
		return fmt.Errorf("%w: negative pool bound", ErrUnpoolable)
	}
	for i, s := range c.Specs {
		if s.Networking.Mode() != domain.NetNone || s.Gate != nil {
			return fmt.Errorf("%w: spec %d: networking %q (only %q sandboxes are pooled)", ErrUnpoolable, i, s.Networking.Mode(), domain.NetNone)
		}
		if s.Image == "" {
			return fmt.Errorf("%w: spec %d has no image", ErrUnpoolable, i)
		}
	}
	return nil
}

// warmPool is a provider's pool.
type warmPool struct {
	cfg   PoolConfig
	token string // label.CreatedBy of this provider's members

	ctx    context.Context // of the refills; cancelled by Close
	cancel context.CancelFunc
	fills  sync.WaitGroup // refills in flight
	claims sync.WaitGroup // claims in flight

	mu      sync.Mutex
	started bool
	closed  bool
	keys    []*poolKey
	members int   // ready or being made
	memory  int64 // their memory limits, bytes

	claimed atomic.Int64 // Provisions served by a member
}

// poolKey is one pooled spec and its ready members.
type poolKey struct {
	spec     sandbox.Spec
	key      string // containerKey of its resolved spec; "" until resolved
	memory   int64  // one member's memory limits, bytes
	ready    []*poolMember
	making   bool
	failures int
	retryAt  time.Time
}

// poolMember is one ready pool member.
type poolMember struct {
	id, token string
	memory    int64
}

func newWarmPool(cfg PoolConfig) *warmPool {
	if cfg.Size == 0 || len(cfg.Specs) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &warmPool{cfg: cfg, token: container.RandomHex(8), ctx: ctx, cancel: cancel}
	for _, s := range cfg.Specs {
		s.SessionID, s.GateTokenRevoker = poolSessionID, nil
		mem := s.Hardening.MemoryBytes
		if mem <= 0 {
			mem = defaults.SessionMemoryBytes
		}
		w.keys = append(w.keys, &poolKey{spec: s, memory: mem + container.KeeperMemoryBytes})
	}
	return w
}

// memberName, memberKeeperName: a member's containers; its volumes are
// memberName + "-v0", "-v1", ….
func (p *Provider) memberName(token string) string { return p.objectName("p", token) }

func (p *Provider) memberKeeperName(token string) string { return p.objectName("pk", token) }

// memberLabels are what a member's objects of role carry.
func (p *Provider) memberLabels(role, token string) map[string]string {
	l := label.Base(p.owner, label.KindSession)
	l[label.Role], l[label.Pool] = role, token
	return l
}

// claimedSession returns the session a claimed member's sandbox container
// (labels l, engine name name) now is: the one its name says, since only a
// claim renames a member to a session's name.
func (p *Provider) claimedSession(l map[string]string, name string) (domain.ID, bool) {
	if l[label.Role] != label.RolePool || l[label.Pool] == "" || !label.Has(l, label.Base(p.owner, label.KindSession)) {
		return "", false
	}
	rest, ok := strings.CutPrefix(strings.TrimPrefix(name, "/"), p.containerName(""))
	if !ok || domain.ID(rest).Validate() != nil {
		return "", false
	}
	return domain.ID(rest), true
}

// isSession reports whether a sandbox container (labels l, engine name
// name) is session id's: made for it, or a member claimed by it.
func (p *Provider) isSession(l map[string]string, name string, id domain.ID) bool {
	if p.ours(l, id) {
		return true
	}
	got, ok := p.claimedSession(l, name)
	return ok && got == id
}

// containerKey digests everything r's container is created from except the
// session: its name, its Session label and its volumes' names.
func containerKey(r *resolved) string {
	s := r.cfg
	s.Labels = make(map[string]string, len(r.cfg.Labels))
	for k, v := range r.cfg.Labels {
		if k != label.Session {
			s.Labels[k] = v
		}
	}
	s.Mounts = append([]container.Mount(nil), r.cfg.Mounts...)
	for i := range r.roots {
		s.Mounts[i].Source = ""
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a Spec holds only strings, numbers, slices and maps
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// startPool starts filling the pool (the first Provision does); a no-op
// once started, or without a pool.
func (p *Provider) startPool() {
	w := p.warm
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return
	}
	w.started = true
	w.mu.Unlock()
	p.refill()
}

// bounded reports whether another member of k would pass the pool's
// bounds; w.mu is held.
func (w *warmPool) bounded(k *poolKey) bool {
	max := w.cfg.MaxMembers
	if max == 0 {
		max = w.cfg.Size * len(w.keys)
	}
	return w.members >= max || w.cfg.MemoryBytes > 0 && w.memory+k.memory > w.cfg.MemoryBytes
}

// refill starts making a member for each spec short of Size, one at a time
// per spec, within the bounds.
func (p *Provider) refill() {
	w := p.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	now := time.Now()
	for _, k := range w.keys {
		if k.making || len(k.ready) >= w.cfg.Size || now.Before(k.retryAt) || w.bounded(k) {
			continue
		}
		k.making = true
		w.members++
		w.memory += k.memory
		w.fills.Add(1)
		go p.fill(k)
	}
}

// fill makes one member of k, in the background.
func (p *Provider) fill(k *poolKey) {
	w := p.warm
	defer w.fills.Done()
	ctx, cancel := context.WithTimeout(w.ctx, poolFillBudget)
	defer cancel()
	start := time.Now()
	m, key, err := p.makeMember(ctx, k.spec)
	w.mu.Lock()
	k.making = false
	closed := w.closed
	switch {
	case err != nil:
		w.members--
		w.memory -= k.memory
		k.failures++
		k.retryAt = time.Now().Add(min(poolRetryDelay<<min(k.failures-1, 6), poolRetryMax))
		retry := time.Until(k.retryAt)
		w.mu.Unlock()
		if !closed {
			p.log.Warn("pool member not made", "image", k.spec.Image, "phase", "pool-fill", "err", err, "retry_in", retry)
			time.AfterFunc(retry, p.refill)
		}
		return
	case closed:
		w.members--
		w.memory -= k.memory
	default:
		k.key, k.failures = key, 0
		m.memory = k.memory
		k.ready = append(k.ready, m)
	}
	w.mu.Unlock()
	if closed {
		// Close is waiting for this fill: what it made goes now.
		p.removeMember(context.WithoutCancel(ctx), m.id, m.token)
		return
	}
	p.log.Debug("pool member ready", "container", p.memberName(m.token), "phase", "pool-fill", "dur", time.Since(start))
	p.refill()
}

// makeMember makes one member of spec: volumes, sandbox (created, checked,
// started, its agent launched) and keeper, as create does for a session.
// On failure it removes what it made.
func (p *Provider) makeMember(ctx context.Context, spec sandbox.Spec) (m *poolMember, key string, err error) {
	r, err := p.resolve(ctx, spec)
	if err != nil {
		return nil, "", err
	}
	key = containerKey(r)
	token := container.RandomHex(8)
	name := p.memberName(token)
	defer func() {
		if err != nil {
			p.removeMember(context.WithoutCancel(ctx), name, token)
		}
	}()
	sb, keeper := r.cfg, r.keeper
	sb.Labels = p.memberLabels(label.RolePool, token)
	sb.Labels[label.Spec], sb.Labels[label.CreatedBy] = r.digest, p.warm.token
	keeper.Labels = p.memberLabels(label.RolePoolKeeper, token)
	keeper.Labels[label.CreatedBy] = p.warm.token
	sb.Mounts = append([]container.Mount(nil), r.cfg.Mounts...)
	keeper.Mounts = append([]container.Mount(nil), r.keeper.Mounts...)
	vols := make([]string, len(r.roots))
	for i := range r.roots {
		vols[i] = volumeName(name, i)
		sb.Mounts[i].Source, keeper.Mounts[i].Source = vols[i], vols[i]
		vctx, vcancel := context.WithTimeout(context.WithoutCancel(ctx), memberCreateBudget) // as the container's create, below
		v, err := p.createVolume(vctx, dockerapi.VolumeCreate{Name: vols[i], Driver: "local", DriverOpts: r.volOpts[i], Labels: p.memberLabels(label.RolePool, token)})
		vcancel()
		if err != nil {
			return nil, "", fmt.Errorf("docker: create volume %s: %w", vols[i], err)
		}
		if !label.Has(v.Labels, p.memberLabels(label.RolePool, token)) {
			return nil, "", fmt.Errorf("docker: volume %s exists without this member's labels", vols[i])
		}
	}
	cfg, err := sb.Config()
	if err != nil {
		return nil, "", fmt.Errorf("docker: %w", err)
	}
	// Not cut by Close (ctx): the engine may finish a create its caller
	// gave up on, after the removal of what this member made had looked.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), memberCreateBudget)
	id, err := p.eng.ContainerCreate(cctx, name, cfg)
	ccancel()
	if err != nil {
		return nil, "", fmt.Errorf("docker: create %s: %w", name, err)
	}
	// Mounted, the volumes can no longer be removed: make sure none went
	// (an orphan sweep of another process) before the create, which would
	// have made an unbounded, unlabelled one of its name.
	vs, err := p.eng.VolumeList(ctx, dockerapi.LabelsFilter(p.memberLabels(label.RolePool, token)))
	if err != nil {
		return nil, "", fmt.Errorf("docker: list volumes of %s: %w", name, err)
	}
	found := 0
	for _, v := range vs {
		if label.Has(v.Labels, p.memberLabels(label.RolePool, token)) && strings.HasPrefix(v.Name, name+"-v") {
			found++
		}
	}
	if found != len(vols) {
		return nil, "", fmt.Errorf("docker: %s: %d of its %d volumes are there", name, found, len(vols))
	}
	// The keeper starts beside the sandbox, as create does.
	r.keepName, r.keeper, r.keepWant = p.memberKeeperName(token), keeper, p.memberLabels(label.RolePoolKeeper, token)
	keepErr := make(chan error, 1)
	go func() { keepErr <- p.keep(ctx, r, &made{}) }()
	b := p.box(id, name, poolSessionID, r.workdir, r.uid)
	err = p.startChecked(ctx, b, r)
	if kerr := <-keepErr; kerr != nil {
		err = errors.Join(err, kerr)
	}
	if err != nil {
		return nil, "", err
	}
	if !p.agent.off && len(r.cfg.Mounts) > len(r.roots) {
		// The agent runs before the member is handed out: a claim's first
		// command goes through it.
		c, aerr := p.startAgent(ctx, b)
		if aerr != nil {
			p.log.Debug("pool member without agent; its commands go through the engine until one starts", "container", name, "err", aerr)
		} else {
			s := p.agentSlotFor(id)
			s.mu.Lock()
			s.conn = c
			s.mu.Unlock()
		}
	}
	return &poolMember{id: id, token: token}, key, nil
}

// take pops a ready member of key, or nil; the claims WaitGroup counts the
// caller until it calls done.
func (w *warmPool) take(key string) *poolMember {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	for _, k := range w.keys {
		if k.key == key && len(k.ready) > 0 {
			m := k.ready[0]
			k.ready = k.ready[1:]
			w.members--
			w.memory -= m.memory
			w.claims.Add(1)
			return m
		}
	}
	return nil
}

// putBack returns an unclaimed member m of key to the pool; false if the
// pool is closed (the caller removes it then).
func (w *warmPool) putBack(key string, m *poolMember) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	for _, k := range w.keys {
		if k.key == key {
			k.ready = append([]*poolMember{m}, k.ready...)
			w.members++
			w.memory += m.memory
			return true
		}
	}
	return false
}

// claim turns a ready member of r's key into session r's sandbox (see the
// top of this file). b is nil when none could be claimed: the caller takes
// the normal path, or, when taken, looks for the session's container again
// (the name is taken). It never fails a Provision: what goes wrong is
// logged and the member removed.
func (p *Provider) claim(ctx context.Context, r *resolved) (b *box, taken bool) {
	w := p.warm
	if w == nil {
		return nil, false
	}
	key := containerKey(r)
	name := p.containerName(r.spec.SessionID)
	for {
		m := w.take(key)
		if m == nil {
			return nil, false
		}
		if !p.memberRuns(ctx, m) {
			// Dead while it waited (killed; an engine restart stops them
			// all): never handed out. It goes, and the pool makes another.
			p.log.Info("pool member not running; removing it", "container", p.memberName(m.token), "phase", "pool-claim")
			p.removeMember(context.WithoutCancel(ctx), m.id, m.token)
			w.claims.Done()
			p.refill()
			continue
		}
		err := p.eng.ContainerRename(ctx, m.id, name)
		switch {
		case err == nil:
			w.claimed.Add(1)
			w.claims.Done()
			p.refill()
			return p.box(m.id, name, r.spec.SessionID, r.workdir, r.uid), false
		case errors.Is(err, dockerapi.ErrConflict):
			// The session's name is taken: by the session (the caller
			// adopts it) or by a concurrent Provision's create.
			if !w.putBack(key, m) {
				p.removeMember(context.WithoutCancel(ctx), m.id, m.token)
			}
			w.claims.Done()
			return nil, true
		case errors.Is(err, dockerapi.ErrNotFound):
			// Gone (a sweep): its keeper and volumes follow.
			p.removeMember(context.WithoutCancel(ctx), p.memberName(m.token), m.token)
			w.claims.Done()
			p.refill()
		default:
			// Renamed or not, unknown: if it was, it is the session's and
			// found by name; if not, its removal by its member name
			// removes it and nothing else.
			p.log.Warn("pool claim failed; creating the sandbox", "session", string(r.spec.SessionID), "err", err)
			p.removeMember(context.WithoutCancel(ctx), p.memberName(m.token), m.token)
			w.claims.Done()
			p.refill()
			return nil, false
		}
	}
}

// memberRuns reports whether member m's sandbox container runs: one
// inspect per claim (its keeper matters only once the sandbox stops, and
// a claimed sandbox's adoption starts it again).
func (p *Provider) memberRuns(ctx context.Context, m *poolMember) bool {
	c, err := p.eng.ContainerInspect(ctx, m.id)
	return err == nil && c.State.Running
}

// removeMember removes member token's sandbox container (ref: its ID, or
// its member name, which a claim no longer matches), keeper and volumes,
// on its own budget, logging failures. A sandbox that was claimed meanwhile
// is the session's: then nothing is removed.
func (p *Provider) removeMember(ctx context.Context, ref, token string) {
	rctx, cancel := context.WithTimeout(ctx, removeBudget)
	defer cancel()
	if err := p.removeMemberParts(rctx, ref, token); err != nil {
		p.log.Warn("removing a pool member", "container", p.memberName(token), "err", err)
	}
}

func (p *Provider) removeMemberParts(ctx context.Context, ref, token string) error {
	c, err := p.eng.ContainerInspect(ctx, ref)
	switch {
	case errors.Is(err, dockerapi.ErrNotFound):
		if claimed, err := p.memberClaimed(ctx, token); err != nil || claimed {
			return err
		}
	case err != nil:
		return fmt.Errorf("docker: inspect %s: %w", ref, err)
	case !label.Has(c.Config.Labels, p.memberLabels(label.RolePool, token)):
		return fmt.Errorf("docker: %s is not pool member %s; not removing it", ref, token)
	default:
		if _, claimed := p.claimedSession(c.Config.Labels, c.Name); claimed {
			return nil
		}
		p.forgetAgent(c.ID)
		if err := p.removeContainer(ctx, c.ID); err != nil {
			return err
		}
	}
	return p.removeMemberRest(ctx, token, true)
}

// memberClaimed reports whether a sandbox container of member token exists
// under any name.
func (p *Provider) memberClaimed(ctx context.Context, token string) (bool, error) {
	want := p.memberLabels(label.RolePool, token)
	cs, err := p.eng.ContainerList(ctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(want)})
	if err != nil {
		return false, fmt.Errorf("docker: list containers of member %s: %w", token, err)
	}
	for _, c := range cs {
		if label.Has(c.Labels, want) {
			return true, nil
		}
	}
	return false, nil
}

// removeMemberRest removes member token's keeper and volumes, once its
// sandbox container is gone (or, claimed, removed by its session's Reap).
// A volume in use is waited for when settle (the caller removed its
// containers: the engine is releasing it), else left: a container uses it,
// so it is no orphan.
func (p *Provider) removeMemberRest(ctx context.Context, token string, settle bool) error {
	kname := p.memberKeeperName(token)
	k, err := p.eng.ContainerInspect(ctx, kname)
	switch {
	case errors.Is(err, dockerapi.ErrNotFound):
	case err != nil:
		return fmt.Errorf("docker: inspect %s: %w", kname, err)
	case !label.Has(k.Config.Labels, p.memberLabels(label.RolePoolKeeper, token)):
		return fmt.Errorf("docker: %s is not pool member %s's keeper; not removing it", kname, token)
	default:
		if err := p.removeContainer(ctx, k.ID); err != nil {
			return err
		}
	}
	want := p.memberLabels(label.RolePool, token)
	vs, err := p.eng.VolumeList(ctx, dockerapi.LabelsFilter(want))
	if err != nil {
		return fmt.Errorf("docker: list volumes of member %s: %w", token, err)
	}
	for _, v := range vs {
		if !label.Has(v.Labels, want) {
			continue
		}
		// In use: the engine is still releasing it from the removed
		// containers (settle), or a container uses it.
		if err := p.removeVolume(ctx, v.Name, false, func() (bool, error) { return settle, nil }); err != nil {
			return err
		}
	}
	return nil
}

// removeOrphanMembers removes the keepers and volumes of members whose
// sandbox container is gone (a Reap or removal cut short), given the
// owner's session containers and volumes as listed. Volumes without a
// keeper are a member's being made (the sandbox comes after them) until
// they are older than poolFillBudget, unless all (no member is being made:
// ReapPool).
func (p *Provider) removeOrphanMembers(ctx context.Context, cs []dockerapi.ContainerSummary, vs []dockerapi.Volume, all bool) error {
	base := label.Base(p.owner, label.KindSession)
	alive := map[string]bool{}
	rest := map[string]bool{}
	for _, c := range cs {
		switch t := c.Labels[label.Pool]; {
		case t == "" || !label.Has(c.Labels, base):
		case c.Labels[label.Role] == label.RolePool:
			alive[t] = true
		case c.Labels[label.Role] == label.RolePoolKeeper:
			rest[t] = true
		}
	}
	for _, v := range vs {
		if t := v.Labels[label.Pool]; t != "" && v.Labels[label.Role] == label.RolePool && label.Has(v.Labels, base) {
			made, err := time.Parse(time.RFC3339, v.CreatedAt)
			if all || rest[t] || err == nil && time.Since(made) > poolFillBudget {
				rest[t] = true
			}
		}
	}
	var errs []error
	for t := range rest {
		if alive[t] {
			continue
		}
		// Listed after the containers: a member made since has its
		// sandbox now.
		if claimed, err := p.memberClaimed(ctx, t); err != nil || claimed {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, p.removeMemberRest(ctx, t, false))
	}
	return errors.Join(errs...)
}

// PoolClaims returns how many Provisions a pool member served; zero without
// a pool.
func (p *Provider) PoolClaims() int64 {
	if p.warm == nil {
		return 0
	}
	return p.warm.claimed.Load()
}

// WarmPool starts filling the pool, if not yet, and waits until every spec
// has Size members ready, or as many as the bounds let be made, or ctx
// ends. Without a pool
// it returns nil at once.
func (p *Provider) WarmPool(ctx context.Context) error {
	w := p.warm
	if w == nil {
		return nil
	}
	p.startPool()
	for {
		w.mu.Lock()
		full, closed := true, w.closed
		for _, k := range w.keys {
			if len(k.ready) < w.cfg.Size && (k.making || !w.bounded(k)) {
				full = false
			}
		}
		w.mu.Unlock()
		if closed {
			return fmt.Errorf("docker: the pool is closed")
		}
		if full {
			return nil
		}
		if err := container.Sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("docker: warming the pool: %w", err)
		}
	}
}

// Close removes the provider's pool: it stops the refills, waits for those
// in flight and for claims, and removes every unclaimed member this
// provider made (the ones it holds and any its label finds), then the
// owner's network and agent volume if no session container is left.
// Sessions are not touched. Close is idempotent; the provider's pool does
// not refill after it (Provisions take the normal path).
func (p *Provider) Close(ctx context.Context) error {
	w := p.warm
	if w == nil {
		return nil
	}
	w.mu.Lock()
	w.closed = true
	var ready []*poolMember
	for _, k := range w.keys {
		for _, m := range k.ready {
			w.members--
			w.memory -= m.memory
		}
		ready = append(ready, k.ready...)
		k.ready = nil
	}
	w.mu.Unlock()
	w.cancel()
	w.fills.Wait()
	w.claims.Wait()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeBudget)
	defer cancel()
	var errs []error
	for _, m := range ready {
		errs = append(errs, p.removeMemberParts(rctx, m.id, m.token))
	}
	// Any member this provider made that it no longer holds (a claim
	// whose outcome was unknown).
	mine := label.Base(p.owner, label.KindSession)
	mine[label.Role], mine[label.CreatedBy] = label.RolePool, w.token
	cs, err := p.eng.ContainerList(rctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(mine)})
	if err != nil {
		errs = append(errs, fmt.Errorf("docker: list pool members: %w", err))
	}
	for _, c := range cs {
		if !label.Has(c.Labels, mine) || len(c.Names) == 0 {
			continue
		}
		if _, claimed := p.claimedSession(c.Labels, c.Names[0]); !claimed {
			errs = append(errs, p.removeMemberParts(rctx, c.ID, c.Labels[label.Pool]))
		}
	}
	errs = append(errs, p.removeNetworkIfUnused(rctx), p.removeAgentIfUnused(rctx))
	return errors.Join(errs...)
}

// memberKeeper points r's keeper at the keeper of the claimed member whose
// sandbox container c is: its member name and labels, the member's
// volumes (so adopt starts it, or makes it again after a crash, over the
// volumes the sandbox mounts).
func (r *resolved) memberKeeper(p *Provider, c dockerapi.ContainerJSON) {
	token := c.Config.Labels[label.Pool]
	r.keepName = p.memberKeeperName(token)
	r.keepWant = p.memberLabels(label.RolePoolKeeper, token)
	r.keeper.Labels = p.memberLabels(label.RolePoolKeeper, token)
	r.keeper.Mounts = append([]container.Mount(nil), r.keeper.Mounts...)
	for i := range r.keeper.Mounts {
		for _, mp := range c.Mounts {
			if mp.Destination == r.roots[i] && mp.Type == "volume" {
				r.keeper.Mounts[i].Source = mp.Name
			}
		}
	}
}

// ReapPool removes every unclaimed pool member of the owner, whichever
// provider made it, and what removals cut short left of members: what a
// crashed process's pool left (Close removes only the provider's own).
// Claimed members are sessions, left to Reap. Run it when no other
// provider of the owner is claiming: a claim the engine applies between
// this call's look-up of a member and its removal would lose the sandbox
// it just claimed (another provider's claim that finds its member gone
// takes the normal path).
func (p *Provider) ReapPool(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeBudget)
	defer cancel()
	want := label.Base(p.owner, label.KindSession)
	want[label.Role] = label.RolePool
	cs, err := p.eng.ContainerList(rctx, dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(want)})
	if err != nil {
		return fmt.Errorf("docker: list pool members: %w", err)
	}
	var errs []error
	for _, c := range cs {
		t := c.Labels[label.Pool]
		if !label.Has(c.Labels, want) || t == "" || len(c.Names) == 0 || strings.TrimPrefix(c.Names[0], "/") != p.memberName(t) {
			continue
		}
		errs = append(errs, p.removeMemberParts(rctx, p.memberName(t), t))
	}
	all, err := p.sessionContainers(rctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	vs, err := p.eng.VolumeList(rctx, dockerapi.LabelsFilter(label.Base(p.owner, label.KindSession)))
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("docker: list volumes: %w", err))...)
	}
	errs = append(errs, p.removeOrphanMembers(rctx, all, vs, true))
	errs = append(errs, p.removeNetworkIfUnused(rctx), p.removeAgentIfUnused(rctx))
	return errors.Join(errs...)
}
