package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/sandbox"
)

// GateHarness is the outside world the gate cases reach: an upstream
// server the backend's gates can reach under several names, and names
// pinned (for the gates only) to addresses the gate must refuse. The
// upstream answers a GET of any path p, over plain HTTP on HTTPPort and
// over TLS (any certificate) on TLSPort, with a body holding "path=" + p.
type GateHarness struct {
	Allowed  string // resolves to the upstream; allowed exactly
	Wildcard string // "*.Allowed": the pattern that admits Sub
	Sub      string // a subdomain of Allowed resolving to the upstream
	Denied   string // resolves to the upstream; not allowed
	Loopback string // matches Wildcard, resolves to 127.0.0.1
	Metadata string // matches Wildcard, resolves to 169.254.169.254
	Private  string // matches Wildcard, resolves to a private address the backend does not admit
	HTTPPort int
	TLSPort  int
	// UpstreamIP is the upstream's address, which a sandbox tries to reach
	// directly.
	UpstreamIP string
}

// EgressLogger is what a backend that supports NetLimited gives the
// suite: its gate's record of a session, oldest first, with what its
// bounds dropped or cut.
type EgressLogger interface {
	EgressLog(ctx context.Context, sessionID domain.ID) (domain.EgressLog, error)
}

// minter counts Generate and Persist calls.
type minter struct {
	mu        sync.Mutex
	generated atomic.Int64
	persisted []string
}

func (m *minter) Generate() string {
	n := m.generated.Add(1)
	return fmt.Sprintf("token-%d-%d", time.Now().UnixNano(), n)
}

func (m *minter) Persist(_ context.Context, _ domain.ID, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.persisted = append(m.persisted, token)
	return nil
}

// limited is the networking of the gate cases.
func (g *GateHarness) limited() domain.Networking {
	return domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{g.Allowed, g.Wildcard}}
}

// testGate runs the gate cases: with no GateHarness, the backend must
// refuse NetLimited (testNetLimited); with one, it must either refuse it
// with sandbox.ErrNetworkingUnsupported, leaving nothing, or pass every
// case.
func testGate(t *testing.T, r *run) {
	g := r.h.Gate
	if g == nil {
		testNetLimited(t, r)
		return
	}
	ctx, cancel := r.ctx()
	defer cancel()
	id := r.id("gated")
	mt := &minter{}
	rv := &revoker{p: r.h.Provider}
	spec := sandbox.Spec{SessionID: id, Image: r.h.Image, Networking: g.limited(), Gate: &sandbox.GateSpec{TokenMinter: mt}, GateTokenRevoker: rv}
	sb, err := r.h.Provider.Provision(ctx, spec)
	if errors.Is(err, sandbox.ErrNetworkingUnsupported) {
		t.Logf("the backend refuses NetLimited here: %v", err)
		if slices.Contains(owned(t, r.h.Provider), id) {
			t.Errorf("a refused NetLimited Provision left a sandbox")
			r.h.Provider.Reap(ctx, id)
		}
		return
	}
	if err != nil {
		t.Fatalf("Provision(NetLimited) = %v", err)
	}
	if len(mt.persisted) != 1 {
		t.Errorf("Provision persisted %d tokens; want 1", len(mt.persisted))
	}
	run := func(t *testing.T, cmd string) sandbox.ExecResult {
		t.Helper()
		ctx, cancel := r.ctx()
		defer cancel()
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: time.Minute})
		if err != nil {
			t.Fatalf("Exec(%q) = %v", cmd, err)
		}
		return res
	}
	get := func(host string, port int, path string) string {
		return fmt.Sprintf("busybox wget -S -q -O - http://%s:%d%s 2>&1", host, port, path)
	}
	// Each attempt, in order, with the verdict the record must hold.
	type attempt struct {
		host, verdict string
	}
	var want []attempt
	// other is the revoker of a Provision of id that fails: never id's.
	other := &revoker{p: r.h.Provider}

	t.Run("AllowedHTTP", func(t *testing.T) {
		for _, h := range []string{g.Allowed, strings.ToUpper(g.Allowed), g.Sub} {
			res := run(t, get(h, g.HTTPPort, "/allowed"))
			if res.ExitCode != 0 || !strings.Contains(res.Stdout, "path=/allowed") {
				t.Errorf("GET http://%s/allowed through the gate = %d %q; want the upstream's answer", h, res.ExitCode, res.Stdout)
			}
			want = append(want, attempt{h, domain.EgressAllowed})
		}
	})
	t.Run("AllowedCONNECT", func(t *testing.T) {
		res := run(t, connectTLS(g.Allowed, g.TLSPort, "/tunnel"))
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, " 200 ") || !strings.Contains(res.Stdout, "path=/tunnel") {
			t.Errorf("CONNECT %s:%d and GET /tunnel over TLS = %d %q %q; want the upstream's answer", g.Allowed, g.TLSPort, res.ExitCode, res.Stdout, res.Stderr)
		}
		want = append(want, attempt{g.Allowed, domain.EgressAllowed})
	})
	t.Run("Refused", func(t *testing.T) {
		for _, tc := range []struct{ host, reason string }{
			{g.Denied, "not allowed"},
			{g.Allowed + ".", "malformed"},
			{g.Loopback, "loopback"},
			{g.Metadata, "link-local"},
			{g.Private, "private"},
		} {
			start := time.Now()
			res := run(t, get(tc.host, g.HTTPPort, "/refused"))
			if res.ExitCode == 0 || !strings.Contains(res.Stdout, "403") || strings.Contains(res.Stdout, "path=/refused") {
				t.Errorf("GET http://%s/refused = %d %q; want a 403", tc.host, res.ExitCode, res.Stdout)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the refusal of %s took %v; want it at once", tc.host, d)
			}
			want = append(want, attempt{tc.host, domain.EgressRefused})
		}
		// CONNECT is judged the same way.
		for _, h := range []string{g.Denied, g.Metadata} {
			res := run(t, connectTLS(h, g.TLSPort, "/refused"))
			if res.ExitCode == 0 || !strings.Contains(res.Stdout, " 403 ") || strings.Contains(res.Stdout, "path=/refused") {
				t.Errorf("CONNECT to %s = %d %q; want a 403", h, res.ExitCode, res.Stdout)
			}
			want = append(want, attempt{h, domain.EgressRefused})
		}
	})
	t.Run("DirectFails", func(t *testing.T) {
		res := run(t, fmt.Sprintf("busybox wget -Y off -T 3 -q -O - http://%s:%d/direct; echo http $?; busybox nc -w 3 %s %d </dev/null; echo tcp $?; unset http_proxy HTTP_PROXY; busybox wget -T 3 -q -O - http://%s:%d/direct; echo unset $?",
			g.UpstreamIP, g.HTTPPort, g.UpstreamIP, g.TLSPort, g.Allowed, g.HTTPPort))
		if strings.Contains(res.Stdout, "path=/direct") || !strings.Contains(res.Stdout, "http 1") || !strings.Contains(res.Stdout, "tcp 1") || !strings.Contains(res.Stdout, "unset 1") {
			t.Errorf("direct connections = %q; want each to fail", res.Stdout)
		}
	})
	t.Run("DNSResolvesNothingOutside", func(t *testing.T) {
		// In parallel: each waits for its resolver's timeout.
		var cmd []string
		for _, h := range []string{g.Allowed, g.Denied, "example.com", "proxy.golang.org"} {
			cmd = append(cmd, "(busybox nslookup "+h+" >/dev/null 2>&1; echo lookup "+h+" $?) &")
		}
		res := run(t, strings.Join(cmd, " ")+" wait")
		if strings.Contains(res.Stdout, " 0\n") || strings.Count(res.Stdout, "lookup ") != 4 {
			t.Errorf("DNS lookups in the sandbox: %q; want each to fail", res.Stdout)
		}
	})
	t.Run("ProxyEnvironment", func(t *testing.T) {
		res := run(t, "env | grep -i _proxy= | sort")
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			if !strings.Contains(res.Stdout, k+"=http://") {
				t.Errorf("sandbox environment %q lacks %s", res.Stdout, k)
			}
		}
		for _, k := range []string{"HTTP_PROXY", "https_proxy", "ALL_PROXY", "no_proxy"} {
			bad := spec
			bad.SessionID = r.id("proxyenv")
			bad.Env = map[string]string{k: "http://elsewhere:1"}
			if sb, err := r.h.Provider.Provision(ctx, bad); err == nil {
				sb.Destroy(ctx)
				t.Errorf("Provision with Env[%s] succeeded; want a refusal", k)
			}
		}
	})
	t.Run("Record", func(t *testing.T) {
		el, ok := r.h.Provider.(EgressLogger)
		if !ok {
			t.Fatalf("the provider supports NetLimited but has no EgressLog")
		}
		log, err := el.EgressLog(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		recs := log.Records
		if log.Dropped != 0 || log.Truncated != 0 {
			t.Errorf("the record says %d dropped and %d truncated; want none", log.Dropped, log.Truncated)
		}
		i := 0
		for _, rec := range recs {
			if i < len(want) && strings.EqualFold(rec.Host, want[i].host) && rec.Verdict == want[i].verdict {
				if rec.Verdict == domain.EgressRefused && rec.Reason == "" {
					t.Errorf("refused record %+v has no reason", rec)
				}
				if rec.Verdict == domain.EgressAllowed && (rec.Addr == "" || rec.BytesDn == 0) {
					t.Errorf("allowed record %+v lacks the address or the bytes", rec)
				}
				i++
			}
		}
		if i != len(want) {
			t.Errorf("the record %+v holds %d of the %d attempts in order; missing %+v", recs, i, len(want), want[i])
		}
		if !slices.IsSortedFunc(recs, func(a, b domain.EgressRecord) int { return a.Time.Compare(b.Time) }) {
			t.Errorf("records are not oldest first")
		}
	})
	t.Run("RecordBounded", func(t *testing.T) {
		// Five requests with a Host of a million bytes: the record keeps
		// each, cut to its bound, and stays readable.
		res := run(t, `gate=${http_proxy#http://}; gate=${gate%/}
head -c 1000000 /dev/zero | tr '\0' a >/tmp/host
for i in 1 2 3 4 5; do { printf 'GET / HTTP/1.1\r\nHost: '; cat /tmp/host; printf '\r\n\r\n'; } | timeout 20 busybox nc ${gate%:*} ${gate##*:} >/dev/null; done; echo sent`)
		if !strings.Contains(res.Stdout, "sent") {
			t.Fatalf("huge requests: %+v", res)
		}
		el := r.h.Provider.(EgressLogger)
		log, err := el.EgressLog(ctx, id)
		if err != nil {
			t.Fatalf("EgressLog after five huge requests = %v", err)
		}
		if log.Truncated != 5 || log.Dropped != 0 {
			t.Errorf("the record says %d truncated, %d dropped; want the 5 huge requests truncated", log.Truncated, log.Dropped)
		}
		recs := log.Records
		huge := 0
		for _, rec := range recs {
			if strings.HasPrefix(rec.Host, "aaaa") {
				huge++
				if len(rec.Host) > 1024 {
					t.Errorf("a record keeps a host of %d bytes", len(rec.Host))
				}
			}
		}
		if huge != 5 || len(recs) == 0 || recs[0].Verdict != domain.EgressAllowed {
			t.Errorf("the record holds %d of the 5 huge requests (and starts with %+v); want all, after the allowed ones", huge, recs[:min(1, len(recs))])
		}
	})
	t.Run("FailedProvisionKeepsRevoker", func(t *testing.T) {
		// Another policy for the session fails, and must not make its
		// revoker the session's: Reap (below) revokes through rv.
		s := spec
		s.Networking.AllowedHosts = []string{g.Denied}
		s.Gate, s.GateTokenRevoker = &sandbox.GateSpec{TokenMinter: &minter{}}, other
		if _, err := r.h.Provider.Provision(ctx, s); !errors.Is(err, sandbox.ErrSpecMismatch) {
			t.Errorf("Provision of %s with another policy = %v; want ErrSpecMismatch", id, err)
		}
	})
	t.Run("FailedGateRevokesItsToken", func(t *testing.T) {
		// A gate whose control plane does not answer as one never
		// starts: the token its Provision persisted is revoked, through
		// that Provision's revoker, and nothing of the session is left.
		fid := r.id("gatefail")
		m, rv := &minter{}, &revoker{p: r.h.Provider}
		s := spec
		s.SessionID, s.GateTokenRevoker = fid, rv
		s.Gate = &sandbox.GateSpec{TokenMinter: m, ControlplaneURL: fmt.Sprintf("http://%s:%d/not-a-control-plane", g.UpstreamIP, g.HTTPPort)}
		if _, err := r.h.Provider.Provision(ctx, s); err == nil {
			r.h.Provider.Reap(ctx, fid)
			t.Fatalf("Provision with a gate that cannot start succeeded")
		}
		if len(m.persisted) != 1 || len(rv.revoked) != 1 || rv.revoked[0] != fid {
			t.Errorf("a failed gate: %d tokens persisted, revocations %q; want 1 persisted and revoked", len(m.persisted), rv.revoked)
		}
		if slices.Contains(owned(t, r.h.Provider), fid) {
			t.Errorf("a Provision whose gate failed left session %s", fid)
			r.h.Provider.Reap(ctx, fid)
		}
	})
	t.Run("ConcurrentProvisionPersistsOneToken", func(t *testing.T) {
		cid := r.id("gatedrace")
		m := &minter{}
		others := []sandbox.Provider{r.h.Provider, r.h.Provider, r.h.Provider}
		if r.h.Other != nil {
			others = append(others, r.h.Other)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(others))
		for i, p := range others {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := spec
				s.SessionID, s.Gate, s.GateTokenRevoker = cid, &sandbox.GateSpec{TokenMinter: m}, nil
				_, errs[i] = p.Provision(ctx, s)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Errorf("concurrent Provision: %v", err)
		}
		if len(m.persisted) != 1 {
			t.Errorf("%d concurrent Provisions persisted %d tokens (%d generated); want exactly 1", len(others), len(m.persisted), m.generated.Load())
		}
		s := spec
		s.SessionID, s.Gate, s.GateTokenRevoker = cid, &sandbox.GateSpec{TokenMinter: m}, nil
		if _, err := r.h.Provider.Provision(ctx, s); err != nil || len(m.persisted) != 1 {
			t.Errorf("adopting Provision = %v and %d tokens persisted; want no new one", err, len(m.persisted))
		}
		if err := r.h.Provider.Reap(ctx, cid); err != nil {
			t.Error(err)
		}
	})
	t.Run("ReapRevokesAndRemoves", func(t *testing.T) {
		if err := r.h.Provider.Reap(ctx, id); err != nil {
			t.Fatal(err)
		}
		if len(rv.revoked) != 1 || rv.revoked[0] != id || !rv.existed[0] {
			t.Errorf("revocations %q (sandbox existed then: %v); want one, before removal", rv.revoked, rv.existed)
		}
		if len(other.revoked) != 0 {
			t.Errorf("the revoker of a failed Provision revoked %q; want none", other.revoked)
		}
		if slices.Contains(owned(t, r.h.Provider), id) {
			t.Errorf("Owned() lists %s after Reap", id)
		}
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Exec after Reap = %v; want ErrNotFound", err)
		}
		if el, ok := r.h.Provider.(EgressLogger); ok {
			if _, err := el.EgressLog(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("EgressLog after Reap = %v; want ErrNotFound", err)
			}
		}
	})
}

// connectTLS is a sandbox command that asks the gate (the host and port of
// $http_proxy) for a CONNECT tunnel to host:port, prints the gate's
// answer, and when it is 200 speaks TLS through the tunnel (busybox
// ssl_client, which checks no certificate) to GET path, printing the
// answer. It exits 0 only when the tunnel answered.
func connectTLS(host string, port int, path string) string {
	script := fmt.Sprintf(`printf 'CONNECT %[1]s:%[2]d HTTP/1.1\r\nHost: %[1]s:%[2]d\r\n\r\n'
while IFS= read -r line; do
	line=$(printf %%s "$line" | tr -d '\r')
	echo "gate: $line" >&2
	[ -z "$line" ] && break
done
exec 3<&0
printf 'GET %[3]s HTTP/1.0\r\nHost: %[1]s\r\n\r\n' | busybox ssl_client -s 3 -n %[1]s >/tmp/tunnel.out 2>&1
`, host, port, path)
	return "rm -f /tmp/tunnel.out; cat >/tmp/connect.sh <<'EOF'\n" + script + "EOF\n" +
		`gate=${http_proxy#http://}; gate=${gate%/}
timeout 20 busybox nc ${gate%:*} ${gate##*:} -e /bin/sh /tmp/connect.sh 2>&1; cat /tmp/tunnel.out 2>/dev/null; grep -q path= /tmp/tunnel.out 2>/dev/null`
}
