package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/gate/otlptest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
	"github.com/stockade/stockade/sandbox/sandboxtest"
)

// gateConfig is the provider configuration the gate tests use: gates on
// the test network, its range admitted, and allowed names pinned to
// refused addresses.
func gateConfig(u *enginetest.Upstream, owner string) Config {
	// Where the gate image's busybox is fetched on a host without one.
	cache, _ := enginetest.ImageCacheDir()
	return Config{
		Owner:            owner,
		GateCacheDir:     cache,
		GateNetwork:      u.Network,
		GateAllowPrivate: []netip.Prefix{u.Subnet},
		GateExtraHosts: []string{
			"loop.allowed.test:127.0.0.1",
			"meta.allowed.test:169.254.169.254",
			"private.allowed.test:10.0.0.1", // private, outside the admitted range
		},
	}
}

// harness is what sandboxtest's gate cases need of this fixture.
func gateHarness(u *enginetest.Upstream) *sandboxtest.GateHarness {
	return &sandboxtest.GateHarness{
		Allowed:    "allowed.test",
		Wildcard:   "*.allowed.test",
		Sub:        "sub.allowed.test",
		Denied:     "denied.test",
		Loopback:   "loop.allowed.test",
		Metadata:   "meta.allowed.test",
		Private:    "private.allowed.test",
		HTTPPort:   8080,
		TLSPort:    8443,
		UpstreamIP: u.IP,
	}
}

// gsh runs a command in the sandbox and fails the test on a backend error.
func gsh(t *testing.T, sb sandbox.Sandbox, cmd string) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Exec(%q) = %v", cmd, err)
	}
	return res
}

// TestGate is what only this backend's topology can be asked: UDP, the
// host, another session, a killed gate, the objects Reap removes. The
// cases every backend must pass are sandboxtest's (TestContract).
func TestGate(t *testing.T) {
	c := enginetest.Client(t)
	if isPodman(t, c) {
		t.Skip("Podman refuses NetLimited (TestContract checks the refusal)")
	}
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	u := enginetest.StartUpstream(t, c, owner)
	p, err := New(gateConfig(u, owner))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ids, _ := p.Owned(ctx)
		for _, id := range ids {
			p.Reap(ctx, id)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	limited := domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{"allowed.test", "*.allowed.test"}}
	start := time.Now()
	sbA, err := p.Provision(ctx, sandbox.Spec{SessionID: "gate-a", Image: img, Networking: limited, Gate: &sandbox.GateSpec{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first gated Provision (gate image built or found): %v", time.Since(start))
	start = time.Now()
	sbB, err := p.Provision(ctx, sandbox.Spec{SessionID: "gate-b", Image: img, Networking: limited, Gate: &sandbox.GateSpec{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second gated Provision: %v", time.Since(start))

	t.Run("Allowed", func(t *testing.T) {
		res := gsh(t, sbA, "busybox wget -q -O - http://allowed.test:8080/a")
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, "upstream host=allowed.test:8080 path=/a") {
			t.Errorf("allowed GET = %+v", res)
		}
	})
	t.Run("Telemetry", func(t *testing.T) {
		// A gate exporting to the upstream's OTLP receiver: the gate
		// reaches it over GateNetwork by name (collector.test, in the
		// admitted test range), and each request is a span there.
		g := &sandbox.GateSpec{OTelEndpoint: enginetest.OTLPEndpoint, OTelInsecure: true}
		sb, err := p.Provision(ctx, sandbox.Spec{SessionID: "gate-otel", Image: img, Networking: limited, Gate: g})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Reap(ctx, "gate-otel")
		if res := gsh(t, sb, "busybox wget -q -O - http://allowed.test:8080/otel"); res.ExitCode != 0 {
			t.Fatalf("allowed GET = %+v", res)
		}
		if res := gsh(t, sb, "busybox wget -q -O - http://denied.test:8080/otel 2>&1"); res.ExitCode == 0 || !strings.Contains(res.Stdout, "403") {
			t.Fatalf("denied GET = %+v; want 403", res)
		}
		// Stop the gate (SIGTERM, as the engine's stop sends): it flushes
		// and exits on its own, before the kill. Spans would leave within
		// the batch timeout anyway; the counters' first periodic export
		// is 15 s after the gate started, so before that only the flush
		// can have sent them.
		gid := p.gateName("gate-otel")
		jg, err := c.ContainerInspect(ctx, gid)
		if err != nil {
			t.Fatal(err)
		}
		started, _ := time.Parse(time.RFC3339Nano, jg.State.StartedAt)
		if err := c.ContainerStop(ctx, gid, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		stopped := time.Since(started)
		if jg, err = c.ContainerInspect(ctx, gid); err != nil || jg.State.Running || jg.State.ExitCode != 0 {
			t.Errorf("the gate after SIGTERM: %+v, %v; want it exited 0 by itself (flushed, not killed)", jg.State, err)
		}
		t.Logf("gate stopped %v after it started (the metric interval is 15 s)", stopped)
		var d otlptest.Dump
		var spans []otlptest.Span
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
			if d, err = otlptest.Fetch(ctx, u.HTTPURL("/otlp/dump")); err != nil {
				t.Fatal(err)
			}
			spans = spans[:0]
			for _, sp := range d.Spans {
				if sp.Resource["stockade.session.id"] == "gate-otel" {
					spans = append(spans, sp)
				}
			}
			_, counted := d.Counter("stockade.gate.requests", map[string]string{"stockade.gate.verdict": "refused"})
			if len(spans) >= 2 && counted || time.Now().After(deadline) {
				break
			}
		}
		if stopped < 15*time.Second {
			if _, ok := d.Counter("stockade.gate.requests", map[string]string{"stockade.gate.verdict": "allowed"}); !ok {
				t.Errorf("the gate stopped %v after it started and its counters are not at the collector: the SIGTERM flush did not send them", stopped)
			}
		}
		byHost := map[string]otlptest.Span{}
		for _, sp := range spans {
			byHost[sp.Str["server.address"]] = sp
		}
		if a := byHost["allowed.test"]; a.Str["stockade.gate.verdict"] != "allowed" || a.Str["network.peer.address"] != u.IP || a.Int["server.port"] != 8080 || a.Int["http.response.status_code"] != 200 || a.Name != "GET" {
			t.Errorf("span of the allowed GET: %+v; want verdict allowed, peer %s, port 8080, status 200", a, u.IP)
		}
		if r := byHost["denied.test"]; r.Str["stockade.gate.verdict"] != "refused" || r.Int["http.response.status_code"] != 403 || !strings.Contains(r.Str["stockade.gate.reason"], "host not allowed") || r.Status != "error" {
			t.Errorf("span of the denied GET: %+v; want verdict refused, 403, its reason", r)
		}
		for _, v := range []string{"allowed", "refused"} {
			if n, ok := d.Counter("stockade.gate.requests", map[string]string{"stockade.gate.verdict": v}); !ok || n < 1 {
				t.Errorf("counter stockade.gate.requests{verdict=%s} = %d (found %v); want at least 1", v, n, ok)
			}
		}
		if len(d.Errors) != 0 || len(spans) != 2 {
			t.Errorf("the receiver holds %d spans of the session (want 2), decode errors %v", len(spans), d.Errors)
		}
		// The endpoint is part of the gate's pairing.
		if _, err := p.Provision(ctx, sandbox.Spec{SessionID: "gate-otel", Image: img, Networking: limited, Gate: &sandbox.GateSpec{}}); !errors.Is(err, sandbox.ErrSpecMismatch) {
			t.Errorf("Provision of gate-otel without its endpoint = %v; want ErrSpecMismatch", err)
		}
	})
	t.Run("UDPDoesNotLeave", func(t *testing.T) {
		before, err := u.UDPCount()
		if err != nil {
			t.Fatal(err)
		}
		// tftp sends a UDP read request to the port; nothing may arrive.
		gsh(t, sbA, "timeout 2 busybox tftp -g -r x -l /tmp/x "+u.IP+" 9999; timeout 2 busybox tftp -g -r x -l /tmp/x allowed.test 9999; true")
		after, _ := u.UDPCount()
		// The counter works: a datagram from the host arrives.
		conn, err := net.Dial("udp", u.IP+":9999")
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("control"))
		conn.Close()
		time.Sleep(200 * time.Millisecond)
		control, _ := u.UDPCount()
		if after != before || control == after {
			t.Errorf("upstream's UDP count %s before the sandbox's datagrams, %s after, %s after the host's one; want unchanged, then one more", before, after, control)
		}
	})
	t.Run("HostUnreachable", func(t *testing.T) {
		l, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var reached sync.WaitGroup
		hits := 0
		var mu sync.Mutex
		reached.Add(1)
		go func() {
			defer reached.Done()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				hits++
				mu.Unlock()
				c.Close()
			}
		}()
		port := l.Addr().(*net.TCPAddr).Port
		j, err := c.ContainerInspect(ctx, p.gateName("gate-a"))
		if err != nil {
			t.Fatal(err)
		}
		// The host's addresses a container could know: the docker0
		// gateway, the test network's gateway, the gate network's would-be
		// gateway (its .1), and the gate's own address on the test network.
		targets := []string{"172.17.0.1", u.Subnet.Addr().Next().String(), j.NetworkSettings.Networks[u.Network].IPAddress}
		if gn, err := p.findNetwork(ctx, p.gateNetName("gate-a")); err == nil && len(gn.IPAM.Config) > 0 {
			pr := netip.MustParsePrefix(gn.IPAM.Config[0].Subnet)
			targets = append(targets, pr.Addr().Next().String())
		}
		var cmd []string
		for _, a := range targets {
			cmd = append(cmd, fmt.Sprintf("busybox nc -w 2 %s %d </dev/null && echo REACHED %s", a, port, a))
		}
		res := gsh(t, sbA, strings.Join(cmd, "; ")+"; cat /proc/sys/net/ipv6/conf/all/disable_ipv6")
		l.Close()
		reached.Wait()
		if hits != 0 || strings.Contains(res.Stdout, "REACHED") {
			t.Errorf("the sandbox reached the host (%d connections): %s %s", hits, res.Stdout, res.Stderr)
		}
		if !strings.HasSuffix(strings.TrimSpace(res.Stdout), "1") {
			t.Errorf("IPv6 is not disabled in the sandbox: %q", res.Stdout)
		}
	})
	t.Run("OutsideCannotUseTheGate", func(t *testing.T) {
		// A container on the gate's outside network that is no session's
		// asks the gate of gate-a for an allowed host, by plain HTTP and
		// by CONNECT: the gate serves only its session's side, so neither
		// reaches the upstream, and the session's record does not grow.
		jg, err := c.ContainerInspect(ctx, p.gateName("gate-a"))
		if err != nil {
			t.Fatal(err)
		}
		gip := jg.NetworkSettings.Networks[u.Network].IPAddress
		before, err := p.EgressLog(ctx, "gate-a")
		n := len(before.Records)
		if err != nil {
			t.Fatal(err)
		}
		spec := container.Spec{Image: img, Network: u.Network, Labels: label.Base(owner+"-intruder", "test"),
			Cmd: []string{"/bin/sh", "-c", fmt.Sprintf(`{ printf 'GET http://allowed.test:8080/intruder HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n'; sleep 2; } | timeout 5 busybox nc %[1]s 3128
{ printf 'CONNECT allowed.test:8443 HTTP/1.1\r\nHost: allowed.test:8443\r\n\r\n'; sleep 2; } | timeout 5 busybox nc %[1]s 3128`, gip)}}
		res, err := container.Run(ctx, c, spec, container.RunOptions{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.Stdout)
		if strings.Contains(out, "path=/intruder") || strings.Contains(out, "established") {
			t.Errorf("a container on the outside network used the session's gate: %q %q", out, res.Stderr)
		}
		after, err := p.EgressLog(ctx, "gate-a")
		if err != nil {
			t.Fatal(err)
		}
		if len(after.Records) != n {
			t.Errorf("the session's record went from %d to %d records: %+v", n, len(after.Records), after.Records[n:])
		}
		// The session itself is still served.
		if ok := gsh(t, sbA, "busybox wget -q -O - http://allowed.test:8080/still"); !strings.Contains(ok.Stdout, "path=/still") {
			t.Errorf("the session's own request after the intruder's: %+v", ok)
		}
	})
	t.Run("HostAddressesRefused", func(t *testing.T) {
		// A listener on every interface of the host counts connections.
		l, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		var hits atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				hits.Add(1)
				c.Close()
			}
		}()
		port := l.Addr().(*net.TCPAddr).Port
		// The host's own addresses (not the bridges other tests make and
		// remove meanwhile) and the outside network's gateway, each
		// admitted as a private /32 and allowed as a host, so that only a
		// rule for the host's addresses can refuse them; and a name
		// resolving to one of them.
		targets := []netip.Addr{u.Subnet.Addr().Next()}
		ifs, err := net.Interfaces()
		if err != nil {
			t.Fatal(err)
		}
		for _, ifc := range ifs {
			if ifc.Flags&net.FlagLoopback != 0 || strings.HasPrefix(ifc.Name, "br-") || strings.HasPrefix(ifc.Name, "veth") {
				continue
			}
			as, _ := ifc.Addrs()
			for _, a := range as {
				if pr, err := netip.ParsePrefix(a.String()); err == nil && pr.Addr().Is4() && !pr.Addr().IsLinkLocalUnicast() {
					targets = append(targets, pr.Addr())
				}
			}
		}
		cfg := gateConfig(u, owner)
		hosts := []string{"*.allowed.test"}
		for _, a := range targets {
			cfg.GateAllowPrivate = append(cfg.GateAllowPrivate, netip.PrefixFrom(a, 32))
			hosts = append(hosts, a.String())
		}
		cfg.GateExtraHosts = append(cfg.GateExtraHosts, "host.allowed.test:"+targets[len(targets)-1].String())
		ph, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := ph.Provision(ctx, sandbox.Spec{SessionID: "gate-h", Image: img, Networking: domain.Networking{Type: domain.NetLimited, AllowedHosts: hosts}, Gate: &sandbox.GateSpec{}})
		if err != nil {
			t.Fatal(err)
		}
		defer ph.Reap(ctx, "gate-h")
		names := []string{"host.allowed.test"}
		for _, a := range targets {
			names = append(names, a.String())
		}
		var cmd []string
		for _, n := range names {
			// nc, not wget: busybox wget crashes on an IP literal through a proxy.
			cmd = append(cmd, fmt.Sprintf(`printf 'GET http://%[1]s:%[2]d/host HTTP/1.1\r\nHost: %[1]s:%[2]d\r\n\r\n' | timeout 10 busybox nc stockade-gate 3128 | grep -q 'X-Stockade-Gate-Reason: .*engine.s host' && echo refused %[1]s`, n, port))
		}
		res := gsh(t, sb, strings.Join(cmd, "; ")+"; true")
		l.Close()
		<-done
		for _, n := range names {
			if !strings.Contains(res.Stdout, "refused "+n+"\n") {
				t.Errorf("a request through the gate to the host at %s was not refused: %q", n, res.Stdout)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the gate reached the host %d times (targets %v): %q", n, names, res.Stdout)
		}
	})
	t.Run("OtherSessionUnreachable", func(t *testing.T) {
		jb, err := c.ContainerInspect(ctx, sbB.ID())
		if err != nil {
			t.Fatal(err)
		}
		jg, err := c.ContainerInspect(ctx, p.gateName("gate-b"))
		if err != nil {
			t.Fatal(err)
		}
		var cmd []string
		for _, n := range jb.NetworkSettings.Networks {
			cmd = append(cmd, "busybox nc -w 2 "+n.IPAddress+" 22 </dev/null && echo REACHED")
		}
		for _, n := range jg.NetworkSettings.Networks {
			cmd = append(cmd, fmt.Sprintf("busybox wget -T 2 -Y off -q -O - http://%s:3128/ && echo REACHED", n.IPAddress))
			cmd = append(cmd, fmt.Sprintf("http_proxy=http://%s:3128 busybox wget -T 2 -q -O - http://allowed.test:8080/ && echo REACHED", n.IPAddress))
		}
		res := gsh(t, sbA, strings.Join(cmd, "; ")+"; true")
		if strings.Contains(res.Stdout, "REACHED") || strings.Contains(res.Stdout, "upstream") {
			t.Errorf("session A reached session B or its gate: %s %s", res.Stdout, res.Stderr)
		}
	})
	t.Run("KilledGateFailsClosedAndHeals", func(t *testing.T) {
		gid := p.gateName("gate-a")
		if err := c.ContainerKill(ctx, gid, "KILL"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ContainerWait(ctx, gid, dockerapi.WaitNotRunning); err != nil {
			t.Fatal(err)
		}
		// Straight into the container, past Exec's healing.
		start := time.Now()
		res, err := container.Exec(ctx, c, sbA.ID(), container.ExecSpec{
			Argv:    []string{"/bin/sh", "-c", "timeout 5 busybox wget -T 3 -q -O - http://allowed.test:8080/dead; echo status $?; busybox wget -T 3 -Y off -q -O - http://" + u.IP + ":8080/dead; echo direct $?"},
			Timeout: 30 * time.Second, Policy: container.KillContainer,
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(res.Stdout), "upstream") || strings.Contains(string(res.Stdout), "status 0") || strings.Contains(string(res.Stdout), "direct 0") {
			t.Errorf("with the gate dead: %q %q; want both requests to fail", res.Stdout, res.Stderr)
		}
		t.Logf("requests with a dead gate failed in %v", time.Since(start))
		if _, err := p.EgressLog(ctx, "gate-a"); !errors.Is(err, ErrGateDown) {
			t.Errorf("EgressLog of a dead gate = %v; want ErrGateDown", err)
		}
		ok := gsh(t, sbA, "busybox wget -q -O - http://allowed.test:8080/healed")
		if ok.ExitCode != 0 || !strings.Contains(ok.Stdout, "path=/healed") {
			t.Errorf("after Exec healed the gate: %+v", ok)
		}
	})
	t.Run("FailedGateLeavesNothing", func(t *testing.T) {
		// A gate that cannot start (its control plane refuses it), a
		// token that cannot be persisted and an OTLP endpoint the address
		// rules or the URL rules refuse each fail Provision, and leave no
		// object of the session.
		for i, tc := range []struct {
			g    *sandbox.GateSpec
			want error // nil: any error
		}{
			{&sandbox.GateSpec{ControlplaneURL: "http://" + u.IP + ":8080/not-a-control-plane"}, nil},
			{&sandbox.GateSpec{TokenMinter: failingMinter{}}, nil},
			{&sandbox.GateSpec{OTelEndpoint: "http://127.0.0.1:4318", OTelInsecure: true}, sandbox.ErrInvalidGate},
			{&sandbox.GateSpec{OTelEndpoint: "http://collector.test:4318"}, sandbox.ErrInvalidGate}, // plain HTTP without OTelInsecure
			{&sandbox.GateSpec{OTelEndpoint: "https://user:pw@collector.test:4318"}, sandbox.ErrInvalidGate},
		} {
			g := tc.g
			id := domain.ID(fmt.Sprintf("gate-fail%d", i))
			start := time.Now()
			_, err := p.Provision(ctx, sandbox.Spec{SessionID: id, Image: img, Networking: limited, Gate: g})
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Provision with gate %+v = %v; want an error (%v)", g, err, tc.want)
			}
			t.Logf("failed Provision in %v: %v", time.Since(start), err)
			ids, err := p.Owned(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(ids, id) {
				t.Errorf("a failed gated Provision left session %s", id)
			}
		}
	})
	t.Run("AdoptionChecksPairing", func(t *testing.T) {
		_, err := p.Provision(ctx, sandbox.Spec{SessionID: "gate-a", Image: img, Networking: limited, Gate: &sandbox.GateSpec{ControlplaneURL: "http://elsewhere.invalid/"}})
		if !errors.Is(err, sandbox.ErrSpecMismatch) {
			t.Errorf("Provision of gate-a with another control plane = %v; want ErrSpecMismatch", err)
		}
		if _, err := p.Provision(ctx, sandbox.Spec{SessionID: "gate-a", Image: img, Networking: limited, Gate: &sandbox.GateSpec{}}); err != nil {
			t.Errorf("Provision of gate-a as made = %v", err)
		}
	})
	t.Run("OwnedListsByGate", func(t *testing.T) {
		// What a crash may leave: the gate (and its network) without the
		// sandbox and keeper.
		for _, n := range []string{p.containerName("gate-b"), p.keeperName("gate-b")} {
			if err := c.ContainerRemove(ctx, n, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil {
				t.Fatal(err)
			}
		}
		vs, _ := c.VolumeList(ctx, dockerapi.LabelsFilter(p.labels("gate-b")))
		for _, v := range vs {
			c.VolumeRemove(ctx, v.Name, true)
		}
		ids, err := p.Owned(ctx)
		if err != nil || !slices.Contains(ids, "gate-b") {
			t.Errorf("Owned() = %v, %v; want gate-b, which has only its gate left", ids, err)
		}
	})
	t.Run("UnrestrictedThroughGate", func(t *testing.T) {
		cfg := gateConfig(u, owner)
		cfg.GateUnrestricted = true
		pu, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := pu.Provision(ctx, sandbox.Spec{SessionID: "gate-u", Image: img, Networking: domain.Networking{Type: domain.NetUnrestricted}})
		if err != nil {
			t.Fatal(err)
		}
		defer pu.Reap(ctx, "gate-u")
		any := gsh(t, sb, "busybox wget -q -O - http://denied.test:8080/any")
		loop := gsh(t, sb, "busybox wget -q -O - http://loop.allowed.test:8080/loop 2>&1")
		direct := gsh(t, sb, "busybox wget -T 3 -Y off -q -O - http://"+u.IP+":8080/direct 2>&1")
		if any.ExitCode != 0 || loop.ExitCode == 0 || !strings.Contains(loop.Stdout, "403") || direct.ExitCode == 0 {
			t.Errorf("unrestricted through a gate: any host %+v, loopback %+v, direct %+v; want the first only", any, loop, direct)
		}
		log, err := pu.EgressLog(ctx, "gate-u")
		recs := log.Records
		if err != nil || len(recs) != 2 || recs[0].Host != "denied.test" || recs[0].Verdict != domain.EgressAllowed || recs[1].Verdict != domain.EgressRefused {
			t.Errorf("EgressLog = %+v, %v; want the two requests", recs, err)
		}
	})
	t.Run("ReapRemovesEverything", func(t *testing.T) {
		if err := p.Reap(ctx, "gate-b"); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{p.containerName("gate-b"), p.keeperName("gate-b"), p.gateName("gate-b")} {
			if _, err := c.ContainerInspect(ctx, n); !errors.Is(err, dockerapi.ErrNotFound) {
				t.Errorf("after Reap, container %s: %v", n, err)
			}
		}
		if _, err := p.findNetwork(ctx, p.gateNetName("gate-b")); !errors.Is(err, dockerapi.ErrNotFound) {
			t.Errorf("after Reap, the gate network: %v", err)
		}
		vs, err := c.VolumeList(ctx, dockerapi.LabelsFilter(p.labels("gate-b")))
		if err != nil || len(vs) != 0 {
			t.Errorf("after Reap, volumes %v, %v", vs, err)
		}
	})
}

// TestGateUserNetwork: gates whose outside network is one the platform
// made (`docker network create`, the engine choosing its range) reach an
// upstream by the aliases it has there, through the engine's resolver,
// with nothing pinned; also for clients that close their sending side
// once the request is sent (busybox nc, as any HTTP/1.x client may).
func TestGateUserNetwork(t *testing.T) {
	c := enginetest.Client(t)
	if isPodman(t, c) {
		t.Skip("Podman refuses NetLimited (TestContract checks the refusal)")
	}
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	network := "stockade-test-usernet-" + container.RandomHex(4)
	if _, err := c.NetworkCreate(ctx, dockerapi.NetworkCreate{Name: network, Driver: "bridge", Labels: label.Base(owner+"-network", "test"), CheckDuplicate: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.NetworkRemove(ctx, network); err != nil {
			t.Errorf("remove network %s: %v", network, err)
		}
	})
	// Registered after the network's cleanup, so it runs first.
	u := enginetest.StartUpstreamWith(t, c, owner, enginetest.UpstreamOptions{Network: network})
	cache, _ := enginetest.ImageCacheDir()
	p, err := New(Config{Owner: owner, GateNetwork: network, GateAllowPrivate: []netip.Prefix{u.Subnet}, GateCacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := p.Reap(ctx, "usernet"); err != nil {
			t.Error(err)
		}
	})
	limited := domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{"allowed.test", "*.allowed.test"}}
	sb, err := p.Provision(ctx, sandbox.Spec{SessionID: "usernet", Image: img, Networking: limited, Gate: &sandbox.GateSpec{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, cmd, want string }{
		{"GET allowed.test", "busybox wget -q -O - http://allowed.test:8080/a 2>&1", "upstream host=allowed.test:8080 path=/a"},
		{"GET sub.allowed.test", "busybox wget -q -O - http://sub.allowed.test:8080/b 2>&1", "upstream host=sub.allowed.test:8080 path=/b"},
		{"GET, half-closed", `printf 'GET http://allowed.test:8080/c HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n' | busybox nc stockade-gate 3128`, "path=/c"},
		{"CONNECT, half-closed", `printf 'CONNECT sub.allowed.test:8443 HTTP/1.1\r\nHost: sub.allowed.test:8443\r\n\r\n' | busybox nc stockade-gate 3128`, "200 Connection established"},
		{"denied", "busybox wget -q -O - http://denied.test:8080/d 2>&1", "403"},
	} {
		if res := gsh(t, sb, tc.cmd); !strings.Contains(res.Stdout, tc.want) {
			t.Errorf("%s: %q %q; want %q", tc.name, res.Stdout, res.Stderr, tc.want)
		}
	}
	log, err := p.EgressLog(ctx, "usernet")
	if err != nil {
		t.Fatal(err)
	}
	recs := log.Records
	allowed := 0
	for _, r := range recs {
		if r.Verdict == domain.EgressAllowed && strings.HasPrefix(r.Addr, u.IP+":") {
			allowed++
		}
	}
	if allowed != 4 {
		t.Errorf("the record holds %d allowed requests to the upstream at %s; want 4: %+v", allowed, u.IP, recs)
	}
}

// failingMinter cannot persist.
type failingMinter struct{}

func (failingMinter) Generate() string { return "never-persisted" }
func (failingMinter) Persist(context.Context, domain.ID, string) error {
	return errors.New("the control plane's store is down")
}

func TestGateConfigRefused(t *testing.T) {
	for _, cfg := range []Config{
		{GateExtraHosts: []string{"no-address"}},
		{GateExtraHosts: []string{"name.:10.0.0.1"}},
		{GateExtraHosts: []string{"name:not-an-ip"}},
		{GateAllowPrivate: []netip.Prefix{{}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded; want a refusal", cfg)
		}
	}
	if _, err := New(Config{GateExtraHosts: []string{"pinned.test:10.0.0.1", "v6.test:::1"}, GateAllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}); err != nil {
		t.Errorf("New with good gate settings = %v", err)
	}
}
