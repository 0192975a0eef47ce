package docker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/sandbox"
)

// TestUnrestrictedSessionsIsolated: two NetUnrestricted sandboxes of one
// owner cannot connect to each other. The control: the listener is
// reachable by the same address from inside its own sandbox.
func TestUnrestrictedSessionsIsolated(t *testing.T) {
	s := newFixture(t)
	unrestricted := domain.Networking{Type: domain.NetUnrestricted}
	if isPodman(t, s.c) {
		// Podman would connect them: the backend refuses instead.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := s.p.Provision(ctx, sandbox.Spec{SessionID: "net-a", Image: s.img, Networking: unrestricted})
		if !errors.Is(err, sandbox.ErrNetworkingUnsupported) {
			t.Errorf("Provision(NetUnrestricted) on Podman = %v; want ErrNetworkingUnsupported", err)
		}
		if left, err := leftovers(s.c, s.p.Owner())(ctx); err != nil || len(left) > 0 {
			t.Errorf("after the refusal, leftovers = %q, %v; want nothing", left, err)
		}
		return
	}
	a := s.provision(t, sandbox.Spec{SessionID: "net-a", Networking: unrestricted})
	b := s.provision(t, sandbox.Spec{SessionID: "net-b", Networking: unrestricted})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := s.c.ContainerInspect(ctx, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	for _, n := range c.NetworkSettings.Networks {
		ip = n.IPAddress
	}
	if ip == "" {
		t.Fatalf("sandbox a has no address: %+v", c.NetworkSettings)
	}

	// listen starts a one-connection listener on port 8080 in a and waits
	// until it listens; the channel gets what it received (or the error).
	listen := func() <-chan string {
		got := make(chan string, 1)
		go func() {
			res, err := a.Exec(ctx, sandbox.ExecRequest{Command: "nc -l -p 8080", Timeout: 30 * time.Second})
			if err != nil {
				got <- "listener: " + err.Error()
				return
			}
			got <- res.Stdout
		}()
		// 1F90 is 8080, 0A is LISTEN; nc listens on a v6 socket.
		res := execIn(t, a, "i=0; while [ $i -lt 100 ]; do cat /proc/net/tcp /proc/net/tcp6 | grep -q ':1F90 0*:0000 0A' && exit 0; sleep 0.1; i=$((i+1)); done; exit 1")
		if res.ExitCode != 0 {
			t.Fatalf("the listener in a never listened: %+v", res)
		}
		return got
	}

	got := listen()
	if res := execIn(t, a, "echo self | nc -w 3 "+ip+" 8080"); res.ExitCode != 0 {
		t.Fatalf("control: connecting from a to its own address %s: %+v; want it to work", ip, res)
	}
	if msg := <-got; strings.TrimSpace(msg) != "self" {
		t.Fatalf("control: the listener got %q; want self", msg)
	}

	got = listen()
	res := execIn(t, b, "echo other | nc -w 3 "+ip+" 8080")
	if res.ExitCode == 0 {
		t.Errorf("connecting from b to a (%s): %+v; want a failure, sandboxes must not reach each other", ip, res)
	}
	// End the listener if b did not reach it.
	execIn(t, a, "echo done | nc -w 3 "+ip+" 8080")
	if msg := <-got; strings.Contains(msg, "other") {
		t.Errorf("the listener in a received %q from b", msg)
	}
}

// TestNetworkNotLeftByFailure: the owner's network is no
// session's, so a refused Provision must not leave it behind for Owned and
// Reap to miss.
func TestNetworkNotLeftByFailure(t *testing.T) {
	s := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := sandbox.Spec{SessionID: "net-missing-image", Image: "stockade/does-not-exist:never", Networking: domain.Networking{Type: domain.NetUnrestricted}}
	if _, err := s.p.Provision(ctx, spec); err == nil {
		t.Fatal("Provision of a missing image succeeded")
	}
	left, err := leftovers(s.c, s.p.Owner())(ctx)
	if err != nil || len(left) > 0 {
		t.Errorf("after a failed Provision, leftovers = %q, %v; want nothing", left, err)
	}
}

// TestNetworkForConverges: concurrent first needs of the owner's network,
// from two providers standing for two processes, end with one network that
// every caller uses.
func TestNetworkForConverges(t *testing.T) {
	s := newFixture(t)
	if isPodman(t, s.c) {
		t.Skip("Podman: NetUnrestricted is refused (TestUnrestrictedSessionsIsolated)")
	}
	other, _ := newProvider(t, s.p.Owner())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names := make([]string, 6)
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i := range names {
		p := s.p
		if i%2 == 1 {
			p = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			names[i], errs[i] = p.networkFor(ctx)
		}()
	}
	wg.Wait()
	for i := range names {
		if errs[i] != nil || names[i] != s.p.networkName() {
			t.Errorf("networkFor %d = %q, %v; want %q", i, names[i], errs[i], s.p.networkName())
		}
	}
	left, err := leftovers(s.c, s.p.Owner())(ctx)
	if err != nil || len(left) != 1 {
		t.Errorf("after concurrent networkFor, the owner has %q, %v; want one network", left, err)
	}
	// With no session left, any Reap removes it.
	if err := s.p.Reap(ctx, "no-such-session"); err != nil {
		t.Fatal(err)
	}
	if left, err := leftovers(s.c, s.p.Owner())(ctx); err != nil || len(left) != 0 {
		t.Errorf("after Reap, the owner has %q, %v; want nothing", left, err)
	}
}

func TestParsePool(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"", true},
		{"10.213.0.0/16", true},
		{"192.168.77.0/24", true},
		{"10.213.0.1/16", false}, // not masked
		{"10.213.0.0/25", false}, // narrower than one owner's /24
		{"fd00::/64", false},     // not IPv4
		{"10.213.0.0", false},    // no prefix length
	} {
		_, err := parsePool(tt.in)
		if tt.ok != (err == nil) {
			t.Errorf("parsePool(%q) = %v; want ok %v", tt.in, err, tt.ok)
		}
	}
	if _, err := New(Config{SubnetPool: "bogus"}); err == nil {
		t.Errorf("New with SubnetPool bogus succeeded")
	}
}
