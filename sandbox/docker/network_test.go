package docker

import (
	"context"
	"strings"
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
	// until it listens; the channel gets what it received.
	listen := func() <-chan string {
		got := make(chan string, 1)
		go func() {
			res, err := a.Exec(ctx, sandbox.ExecRequest{Command: "nc -l -p 8080", Timeout: 30 * time.Second})
			if err != nil {
				t.Errorf("listener: %v", err)
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
