package docker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// poolFixture is a provider with a warm pool of size of the plain spec;
// at the end its sessions are reaped, the pool closed, and nothing of the
// owner may remain.
func poolFixture(t *testing.T, size int) (*Provider, *dockerapi.Client, string) {
	t.Helper()
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	p, err := New(Config{Owner: owner, Pool: PoolConfig{Size: size, Specs: []sandbox.Spec{{Image: img}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reapAll(t, p, c) })
	return p, c, img
}

// poolMembers lists the names of owner's unclaimed pool members.
func poolMembers(t *testing.T, p *Provider, c *dockerapi.Client) []string {
	t.Helper()
	want := label.Base(p.owner, label.KindSession)
	want[label.Role] = label.RolePool
	cs, err := c.ContainerList(context.Background(), dockerapi.ListOptions{All: true, Filters: dockerapi.LabelsFilter(want)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range cs {
		if strings.HasPrefix(x.Names[0], "/"+p.memberName("")) {
			out = append(out, x.Names[0])
		}
	}
	return out
}

// TestPoolClaim: a Provision of a pooled spec is a claimed member, named
// and seen as a normal Provision's sandbox (Owned, Attach, idempotent
// Provision, ErrSpecMismatch), never listed as a session while unclaimed;
// the pool refills; Reap removes the claimed member whole.
func TestPoolClaim(t *testing.T) {
	p, c, img := poolFixture(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.WarmPool(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, err := p.Owned(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("Owned() with only the pool = %q, %v; want none", ids, err)
	}
	id := domain.ID("claimed")
	sb, err := p.Provision(ctx, sandbox.Spec{SessionID: id, Image: img})
	if err != nil {
		t.Fatal(err)
	}
	if n := p.PoolClaims(); n != 1 {
		t.Fatalf("PoolClaims() = %d; want 1", n)
	}
	j, err := c.ContainerInspect(ctx, sb.ID())
	if err != nil || strings.TrimPrefix(j.Name, "/") != p.containerName(id) {
		t.Fatalf("claimed container is named %q (%v); want %s", j.Name, err, p.containerName(id))
	}
	if got := execIn(t, sb, "id -u; echo $HOME; pwd").Stdout; got != "65534\n/workspace\n/workspace\n" {
		t.Errorf("claimed sandbox runs %q", got)
	}
	if ids, err := p.Owned(ctx); err != nil || !slices.Equal(ids, []domain.ID{id}) {
		t.Errorf("Owned() = %q, %v; want [%s]", ids, err, id)
	}
	if again, err := p.Provision(ctx, sandbox.Spec{SessionID: id, Image: img}); err != nil || again.ID() != sb.ID() {
		t.Errorf("Provision again = %v; want the claimed sandbox", err)
	}
	if _, err := p.Provision(ctx, sandbox.Spec{SessionID: id, Image: img, Workdir: "/src"}); err == nil || !strings.Contains(err.Error(), sandbox.ErrSpecMismatch.Error()) {
		t.Errorf("Provision with another workdir = %v; want ErrSpecMismatch", err)
	}
	if a, err := p.Attach(ctx, id); err != nil || a.ID() != sb.ID() {
		t.Errorf("Attach = %v", err)
	}
	if err := p.WarmPool(ctx); err != nil {
		t.Fatal(err)
	}
	if m := poolMembers(t, p, c); len(m) != 1 {
		t.Errorf("after the refill the pool holds %q; want one member", m)
	}
	if err := p.Reap(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ids, err := p.Owned(ctx); err != nil || len(ids) != 0 {
		t.Errorf("Owned() after Reap = %q, %v; want none", ids, err)
	}
	// What is left is exactly the one unclaimed member (its sandbox,
	// keeper, volumes) and the agent's volume.
	left, err := leftovers(c, p.owner)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		if !strings.Contains(l, p.memberName("")) && !strings.Contains(l, p.memberKeeperName("")) && !strings.Contains(l, "stockade-agent-") {
			t.Errorf("after Reap, %q is left", l)
		}
	}
}

// TestPoolCloseRacesRefill: a Close at any point of the pool's refills
// (before the first member, while members are being made, once it is full)
// leaves nothing of the owner.
func TestPoolCloseRacesRefill(t *testing.T) {
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, after := range []time.Duration{0, 20 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond, 800 * time.Millisecond, -1} {
		p, err := New(Config{Owner: owner, Pool: PoolConfig{Size: 2, Specs: []sandbox.Spec{{Image: img}}}})
		if err != nil {
			t.Fatal(err)
		}
		p.startPool()
		if after < 0 {
			if err := p.WarmPool(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			time.Sleep(after)
		}
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close after %v = %v", after, err)
		}
		if left, err := leftovers(c, owner)(ctx); err != nil || len(left) > 0 {
			t.Fatalf("Close after %v left %q, %v; want nothing", after, left, err)
		}
		// Closed, the pool hands out nothing.
		for _, k := range p.warm.keys {
			if p.warm.take(k.key) != nil {
				t.Errorf("a closed pool handed out a member")
			}
		}
	}
}

// TestPoolReapAfterCrash: the members a provider left without Close (a
// crashed process's) are removed by another provider's ReapPool, which
// leaves a claimed member (a session) alone; Owned + Reap then leave
// nothing.
func TestPoolReapAfterCrash(t *testing.T) {
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dead, err := New(Config{Owner: owner, Pool: PoolConfig{Size: 2, Specs: []sandbox.Spec{{Image: img}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.WarmPool(ctx); err != nil {
		t.Fatal(err)
	}
	sb, err := dead.Provision(ctx, sandbox.Spec{SessionID: "survivor", Image: img})
	if err != nil || dead.PoolClaims() != 1 {
		t.Fatalf("Provision = %v, claims %d; want a claim", err, dead.PoolClaims())
	}
	if err := dead.WarmPool(ctx); err != nil { // idle again: as a crashed process leaves it
		t.Fatal(err)
	}
	next, _ := newProvider(t, owner)
	if err := next.ReapPool(ctx); err != nil {
		t.Fatal(err)
	}
	if m := poolMembers(t, next, c); len(m) != 0 {
		t.Errorf("after ReapPool the members %q are left", m)
	}
	if got := execIn(t, sb, "echo alive").Stdout; got != "alive\n" {
		t.Errorf("the claimed sandbox answers %q after ReapPool", got)
	}
	ids, err := next.Owned(ctx)
	if err != nil || !slices.Equal(ids, []domain.ID{"survivor"}) {
		t.Fatalf("Owned() = %q, %v; want [survivor]", ids, err)
	}
	if err := next.Reap(ctx, "survivor"); err != nil {
		t.Fatal(err)
	}
	if left, err := leftovers(c, owner)(ctx); err != nil || len(left) > 0 {
		t.Errorf("after ReapPool, Owned and Reap, leftovers = %q, %v; want nothing", left, err)
	}
	dead.Close(ctx)
}

// TestPoolBounds: the pool holds no more members than MaxMembers, and no
// more than MemoryBytes of memory limits allow.
func TestPoolBounds(t *testing.T) {
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	one := int64(defaults.SessionMemoryBytes + container.KeeperMemoryBytes)
	for _, tc := range []struct {
		name string
		cfg  PoolConfig
		want int
	}{
		{"size", PoolConfig{Size: 2}, 2},
		{"max-members", PoolConfig{Size: 3, MaxMembers: 1}, 1},
		{"memory", PoolConfig{Size: 3, MemoryBytes: 2*one + one/2}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			tc.cfg.Specs = []sandbox.Spec{{Image: img}}
			p, err := New(Config{Owner: owner, Pool: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			defer reapAll(t, p, c)
			if err := p.WarmPool(ctx); err != nil {
				t.Fatal(err)
			}
			if m := poolMembers(t, p, c); len(m) != tc.want {
				t.Errorf("the pool holds %d members (%q); want %d", len(m), m, tc.want)
			}
		})
	}
}

// TestPoolConfigRefused: specs that cannot be pooled are refused by New,
// before any engine call.
func TestPoolConfigRefused(t *testing.T) {
	for _, cfg := range []PoolConfig{
		{Size: 1, Specs: []sandbox.Spec{{Image: "x", Networking: domain.Networking{Type: domain.NetUnrestricted}}}},
		{Size: 1, Specs: []sandbox.Spec{{Image: "x", Networking: domain.Networking{Type: domain.NetLimited}}}},
		{Size: 1, Specs: []sandbox.Spec{{}}},
		{Size: -1},
	} {
		if _, err := New(Config{Host: "unix:///nonexistent.sock", Pool: cfg}); !errors.Is(err, ErrUnpoolable) {
			t.Errorf("New(Pool %+v) = %v; want ErrUnpoolable", cfg, err)
		}
	}
	p, err := New(Config{Host: "unix:///nonexistent.sock"})
	if err != nil || p.warm != nil {
		t.Errorf("New without Pool = %v, pool %v; want no pool", err, p.warm)
	}
	if err := p.Close(context.Background()); err != nil || p.PoolClaims() != 0 {
		t.Errorf("Close without a pool = %v", err)
	}
}

// TestPoolConcurrentClaims: concurrent Provisions of one session from a
// full pool converge on one sandbox, with one member claimed (the others
// go back); concurrent Provisions of distinct sessions never get the same
// member.
func TestPoolConcurrentClaims(t *testing.T) {
	p, _, img := poolFixture(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	provisionAll := func(ids []domain.ID) []string {
		got := make([]string, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, err := p.Provision(ctx, sandbox.Spec{SessionID: id, Image: img})
				if err != nil {
					t.Errorf("Provision(%s) = %v", id, err)
					return
				}
				got[i] = sb.ID()
			}()
		}
		wg.Wait()
		return got
	}
	if err := p.WarmPool(ctx); err != nil {
		t.Fatal(err)
	}
	same := provisionAll([]domain.ID{"one", "one", "one", "one"})
	for _, id := range same {
		if id != same[0] {
			t.Fatalf("concurrent Provisions of one session returned %q; want one sandbox", same)
		}
	}
	if n := p.PoolClaims(); n != 1 {
		t.Errorf("PoolClaims() = %d after one session's Provisions from a full pool; want 1", n)
	}
	if err := p.WarmPool(ctx); err != nil {
		t.Fatal(err)
	}
	before := p.PoolClaims()
	distinct := provisionAll([]domain.ID{"a", "b", "c"})
	seen := map[string]bool{same[0]: true}
	for _, id := range distinct {
		if seen[id] {
			t.Errorf("two sessions got sandbox %s (all: %q, %q)", id, same, distinct)
		}
		seen[id] = true
	}
	if n := p.PoolClaims() - before; n != 3 {
		t.Errorf("%d of 3 distinct sessions were served by the full pool; want 3", n)
	}
}

// TestPoolDeadMember: a member that stopped while it waited (killed, or
// the engine restarted) is never handed out: Provision gives a sandbox
// that runs, and the dead member is removed (issue 23, item 6: the first
// Exec said the sandbox did not exist).
func TestPoolDeadMember(t *testing.T) {
	p, c, img := poolFixture(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.WarmPool(ctx); err != nil {
		t.Fatal(err)
	}
	members := poolMembers(t, p, c)
	if len(members) != 1 {
		t.Fatalf("pool members %q; want one", members)
	}
	dead := strings.TrimPrefix(members[0], "/")
	if err := c.ContainerKill(ctx, dead, "KILL"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ContainerWait(ctx, dead, dockerapi.WaitNotRunning); err != nil {
		t.Fatal(err)
	}
	sb, err := p.Provision(ctx, sandbox.Spec{SessionID: "after-death", Image: img})
	if err != nil {
		t.Fatal(err)
	}
	if res := execIn(t, sb, "echo runs"); res.Stdout != "runs\n" {
		t.Errorf("the sandbox Provision gave: %+v", res)
	}
	if _, err := c.ContainerInspect(ctx, dead); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("the dead member %s is still there (%v); want it removed", dead, err)
	}
}
