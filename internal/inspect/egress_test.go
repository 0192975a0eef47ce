package inspect

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/egress"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/toolchain"
	"github.com/stockade/stockade/internal/workflow"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// TestInspect_BehindTheGate runs inspect with a module proxy served over
// HTTP by the test upstream (the fixture proxy's files, at
// allowed.test:8080/files/ on a test network of its own), reached only
// through the run's egress gate: acquisition through the admitted proxy
// succeeds and the report's acquire record lists its host as allowed;
// a proxy that redirects the go command to another host (denied.test, the
// same server under another name, which would serve the same files) gets
// that host refused by the gate, the acquisition fails, and the report
// names the host (on Podman, which cannot keep the gate's network, both
// are refused with egress.ErrNotIsolated). Were the gate bypassed, or admitting more than the
// proxy, the second inspect would pass; were it absent, the first could
// not reach the test network at all. Nothing of either run is left.
func TestInspect_BehindTheGate(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	// The upstream serves the fixture proxy's files as nobody.
	filepath.WalkDir(proxy, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			mode := os.FileMode(0o644)
			if d.IsDir() {
				mode = 0o755
			}
			os.Chmod(p, mode)
		}
		return nil
	})
	owner := enginetest.Owner(t)
	podman := enginetest.Podman(t, eng)
	up := enginetest.StartUpstreamWith(t, eng, owner, enginetest.UpstreamOptions{Files: proxy})
	dir, err := filepath.Abs(filepath.Join(repos, "clean"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		proxy   string
		verdict report.Verdict
		check   func(t *testing.T, rep *report.Report, acquire []domain.EgressRecord)
	}{
		{"admitted", "http://allowed.test:8080/files/", report.Clean, func(t *testing.T, rep *report.Report, acquire []domain.EgressRecord) {
			if len(acquire) == 0 {
				t.Fatal("the acquire record is empty; want the module downloads")
			}
			for _, r := range acquire {
				if r.Host != "allowed.test" || r.Verdict != domain.EgressAllowed || r.Status != 200 || !strings.HasPrefix(r.Addr, up.IP+":") {
					t.Errorf("acquire record %+v; want allowed.test admitted, answered 200 from %s", r, up.IP)
				}
			}
			if !slices.ContainsFunc(acquire, func(r domain.EgressRecord) bool { return r.BytesDn > 0 }) {
				t.Errorf("no acquire record carried bytes down: %+v", acquire)
			}
			// Reading the candidates' go.mod files asks the checksum
			// database, whose host the gate admits (here it does not
			// resolve: failed, never refused).
			if len(rep.Egress) != 2 || rep.Egress[1].Phase != "candidates" ||
				!slices.ContainsFunc(rep.Egress[1].Records, func(r domain.EgressRecord) bool {
					return r.Host == "sum.golang.org" && r.Verdict != domain.EgressRefused
				}) {
				t.Errorf("egress %+v; want the candidates phase with sum.golang.org admitted", rep.Egress)
			}
		}},
		{"redirected elsewhere", "http://allowed.test:8080/redirect/denied.test/", report.AcquisitionFailed, func(t *testing.T, rep *report.Report, acquire []domain.EgressRecord) {
			if rep.Acquisition == nil || !slices.Equal(rep.Acquisition.RefusedHosts, []string{"denied.test"}) {
				t.Fatalf("acquisition %+v; want denied.test named as refused", rep.Acquisition)
			}
			var redirected, refused bool
			for _, r := range acquire {
				switch {
				case r.Host == "allowed.test" && r.Verdict == domain.EgressAllowed && r.Status == 302:
					redirected = true
				case r.Host == "denied.test" && r.Verdict == domain.EgressRefused && r.Status == 403 && strings.Contains(r.Reason, "not allowed"):
					refused = true
				default:
					t.Errorf("unexpected acquire record %+v", r)
				}
			}
			if !redirected || !refused {
				t.Errorf("acquire record %+v; want allowed.test's 302 and denied.test refused", acquire)
			}
			var b bytes.Buffer
			report.WriteText(&b, rep)
			if !strings.Contains(b.String(), "the egress gate refused: denied.test") || !strings.Contains(b.String(), "egress: acquire ") {
				t.Errorf("the text report does not name the refused host:\n%s", b.String())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), fixtureTimeout+5*time.Minute)
			defer cancel()
			rep, err := Inspect(ctx, eng, Options{Options: workflow.Options{
				Dir: dir, Proxy: tc.proxy, DataDir: dataDir, Timeout: fixtureTimeout, LockTimeout: 10 * time.Minute, Owner: owner, GateNetwork: up.Network,
				GateAllowPrivate: []netip.Prefix{up.Subnet},
			}})
			if podman {
				// Podman does not keep a gate network without a
				// gateway: acquisition is refused, never run ungated.
				if !errors.Is(err, egress.ErrNotIsolated) {
					t.Errorf("Inspect on Podman = %v, %+v; want egress.ErrNotIsolated", err, rep)
				}
				leftovers(t, eng, owner)
				return
			}
			if err != nil {
				t.Fatalf("Inspect = %v", err)
			}
			var b bytes.Buffer
			report.WriteText(&b, rep)
			t.Logf("report:\n%s", b.String())
			if rep.Verdict != tc.verdict {
				t.Errorf("verdict %s; want %s", rep.Verdict, tc.verdict)
			}
			if len(rep.Egress) == 0 || rep.Egress[0].Phase != "acquire" {
				t.Fatalf("egress %+v; want the acquire phase's record first", rep.Egress)
			}
			tc.check(t, rep, rep.Egress[0].Records)
			leftovers(t, eng, owner)
		})
	}
}

// leftovers fails t if a container, volume or network of owner's runs is
// left (the upstream's are labelled with another owner).
func leftovers(t *testing.T, eng *dockerapi.Client, owner string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	left, err := enginetest.Leftovers(ctx, eng, map[string]string{label.Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("left in the engine: %q", left)
	}
}

// TestInspect_PrivateModules: a module whose dependency only a private
// proxy serves (the test upstream over HTTPS with its own certificate, at
// allowed.test:8443/private/, wanting HTTP Basic credentials), reached
// through the run's egress gate, as Go users configure it: -private (no
// checksum database for those modules, never direct), the proxy's CA, and
// the credentials in a netrc file or from a credential helper. Without
// credentials the acquisition fails on the proxy's 401; with either, the
// module is clean, and its own test finds no trace of the credentials
// where it runs (execute).
func TestInspect_PrivateModules(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	filepath.WalkDir(proxy, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			mode := os.FileMode(0o644)
			if d.IsDir() {
				mode = 0o755
			}
			os.Chmod(p, mode)
		}
		return nil
	})
	owner := enginetest.Owner(t)
	if enginetest.Podman(t, eng) {
		t.Skip("Podman cannot keep the gate's network (TestInspect_BehindTheGate)")
	}
	up := enginetest.StartUpstreamWith(t, eng, owner, enginetest.UpstreamOptions{Files: proxy})
	cert, err := up.Cert()
	if err != nil {
		t.Fatal(err)
	}
	secrets := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(secrets, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := write("ca.pem", string(cert), 0o600)
	netrc := write("netrc", "machine allowed.test:8443 login "+enginetest.PrivateUser+" password "+enginetest.PrivatePassword+"\n", 0o600)
	// GOAUTH=command: the credentials for the proxy's URL, as headers.
	helper := write("helper", "#!/bin/sh\nprintf 'https://allowed.test:8443/private/\\n\\nAuthorization: Basic %s\\n\\n' '"+
		base64.StdEncoding.EncodeToString([]byte(enginetest.PrivateUser+":"+enginetest.PrivatePassword))+"'\n", 0o700)
	dir, err := filepath.Abs(filepath.Join("testdata", "repos", "private-module"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		access  toolchain.ModuleAccess
		verdict report.Verdict
	}{
		{"no credentials", toolchain.ModuleAccess{Private: "stockade.test/*", ProxyCA: ca}, report.AcquisitionFailed},
		{"netrc", toolchain.ModuleAccess{Private: "stockade.test/*", ProxyCA: ca, Netrc: netrc}, report.Clean},
		{"credential helper", toolchain.ModuleAccess{Private: "stockade.test/*", ProxyCA: ca, AuthHelper: helper}, report.Clean},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), fixtureTimeout+5*time.Minute)
			defer cancel()
			rep, err := Inspect(ctx, eng, Options{Options: workflow.Options{
				Dir: dir, Proxy: "https://allowed.test:8443/private/", Access: tc.access, DataDir: dataDir, Timeout: fixtureTimeout,
				LockTimeout: 10 * time.Minute, Owner: owner, GateNetwork: up.Network, GateAllowPrivate: []netip.Prefix{up.Subnet},
			}})
			if err != nil {
				t.Fatalf("Inspect = %v", err)
			}
			var b bytes.Buffer
			report.WriteText(&b, rep)
			if rep.Verdict != tc.verdict {
				t.Fatalf("verdict %s; want %s\n%s", rep.Verdict, tc.verdict, b.String())
			}
			if tc.verdict == report.AcquisitionFailed && !strings.Contains(rep.Acquisition.Detail, "401") {
				t.Errorf("acquisition %+v; want the proxy's 401 named", rep.Acquisition)
			}
			if strings.Contains(b.String(), enginetest.PrivatePassword) {
				t.Errorf("the report shows the password:\n%s", b.String())
			}
			if len(rep.Egress) == 0 || !slices.ContainsFunc(rep.Egress[0].Records, func(r domain.EgressRecord) bool {
				return r.Host == "allowed.test" && r.Port == "8443" && r.Verdict == domain.EgressAllowed
			}) {
				t.Errorf("egress %+v; want the private proxy reached through the gate", rep.Egress)
			}
			leftovers(t, eng, owner)
		})
	}
}
