package enginetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Upstream is the gate tests' outside world: one container of
// testdata/upstream on a network of its own, with the DNS aliases
// allowed.test, sub.allowed.test, denied.test and collector.test (its OTLP
// receiver, at OTLPEndpoint).
type Upstream struct {
	Network string       // the test network's name: the gates' Config.GateNetwork
	Subnet  netip.Prefix // its range: the gates' Config.GateAllowPrivate
	IP      string       // the upstream's address on it
	id      string       // the upstream container
}

// OTLPEndpoint is the upstream's OTLP/HTTP receiver as a gate on the test
// network names it (plain HTTP: GateSpec.OTelInsecure); the host reads
// what it received at HTTPURL("/otlp/dump").
const OTLPEndpoint = "http://collector.test:8080/otlp"

var (
	upstreamImgOnce sync.Once
	upstreamImg     string
	upstreamImgErr  error
)

// upstreamImage builds testdata/upstream (beside this file) with the host's go command and
// composes it into an image (once per test process).
func upstreamImage(t testing.TB, c *dockerapi.Client) string {
	t.Helper()
	upstreamImgOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stockade-upstream-")
		if err != nil {
			upstreamImgErr = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "upstream")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/upstream")
		cmd.Dir = filepath.Dir(file)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			upstreamImgErr = fmt.Errorf("go build testdata/upstream: %v: %s", err, out)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := image.Build(ctx, c, image.Options{NoGo: true, NoBusybox: true, NoCABundle: true, Program: bin, Tag: "stockade/test-upstream:local"})
		upstreamImg, upstreamImgErr = res.ID, err
	})
	if upstreamImgErr != nil {
		t.Fatalf("upstream image: %v", upstreamImgErr)
	}
	return upstreamImg
}

// UpstreamOptions are what StartUpstreamWith adds to the upstream.
type UpstreamOptions struct {
	// Files is a host directory (such as a GOPROXY file layout from
	// internal/modproxy) the upstream serves read-only at
	// http://<alias>:8080/files/, and redirects to from
	// /redirect/<host>/; empty serves none.
	Files string
	// Network is an existing network (such as one `docker network create`
	// made, the engine choosing its range) the upstream joins instead of
	// a test network of its own; the caller removes it.
	Network string
}

// StartUpstream makes the test network (a /24 of 10.215.0.0/16 no other
// network uses) and the upstream on it; both go at the test's end.
func StartUpstream(t testing.TB, c *dockerapi.Client, owner string) *Upstream {
	t.Helper()
	return StartUpstreamWith(t, c, owner, UpstreamOptions{})
}

// StartUpstreamWith is StartUpstream with o.
func StartUpstreamWith(t testing.TB, c *dockerapi.Client, owner string, o UpstreamOptions) *Upstream {
	t.Helper()
	img := upstreamImage(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var b [3]byte
	rand.Read(b[:])
	u := &Upstream{Network: "stockade-test-up-" + hex.EncodeToString(b[:])}
	// Not the provider's owner: Leftovers must not count the fixture.
	labels := label.Base(owner+"-upstream", "test")
	if o.Network != "" {
		u.Network = o.Network
		ns, err := c.NetworkList(ctx, dockerapi.Filters{"name": {o.Network}})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			if n.Name == o.Network && len(n.IPAM.Config) > 0 {
				u.Subnet, err = netip.ParsePrefix(n.IPAM.Config[0].Subnet)
			}
		}
		if err != nil || !u.Subnet.IsValid() {
			t.Fatalf("network %s has no subnet: %v", o.Network, err)
		}
	}
	for i := 0; o.Network == ""; i++ {
		u.Subnet = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 215, b[i%3] ^ byte(i), 0}), 24)
		_, err := c.NetworkCreate(ctx, dockerapi.NetworkCreate{Name: u.Network, Driver: "bridge", Labels: labels, CheckDuplicate: true,
			IPAM: &dockerapi.IPAM{Config: []dockerapi.IPAMConfig{{Subnet: u.Subnet.String()}}}})
		if err == nil {
			break
		}
		if !errors.Is(err, dockerapi.ErrForbidden) || i > 20 {
			t.Fatalf("create the test network: %v", err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if u.id != "" {
			c.ContainerRemove(ctx, u.id, dockerapi.RemoveOptions{Force: true})
		}
		if o.Network == "" {
			c.NetworkRemove(ctx, u.Network)
		}
	})
	spec := container.Spec{Image: img, Network: u.Network, Aliases: []string{"allowed.test", "sub.allowed.test", "denied.test", "collector.test"}, Labels: labels}
	if o.Files != "" {
		spec.Mounts = []container.Mount{{Type: container.Bind, Source: o.Files, Target: "/files"}}
	}
	cfg, err := spec.Config()
	if err != nil {
		t.Fatal(err)
	}
	if u.id, err = c.ContainerCreate(ctx, "", cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.ContainerStart(ctx, u.id); err != nil {
		t.Fatal(err)
	}
	j, err := c.ContainerInspect(ctx, u.id)
	if err != nil {
		t.Fatal(err)
	}
	u.IP = j.NetworkSettings.Networks[u.Network].IPAddress
	if u.IP == "" {
		t.Fatalf("upstream has no address on %s", u.Network)
	}
	// The host reaches the test network; wait until the upstream answers.
	for i := 0; ; i++ {
		if _, err := u.UDPCount(); err == nil {
			break
		} else if i > 100 {
			t.Fatalf("upstream does not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return u
}

// The credentials the upstream's private module proxy wants
// (https://allowed.test:8443/private/, HTTP Basic).
const (
	PrivateUser     = "stockade"
	PrivatePassword = "s3cret-0f-the-private-proxy"
)

// Cert returns the upstream's TLS certificate (PEM), which it makes at
// start: what a client on the test network must trust.
func (u *Upstream) Cert() ([]byte, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(u.HTTPURL("/cert"))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("upstream /cert: %s", resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// HTTPURL is the URL of path on the upstream's plain-HTTP port, from the
// host.
func (u *Upstream) HTTPURL(path string) string {
	return "http://" + u.IP + ":8080" + path
}

// UDPCount asks the upstream how many UDP datagrams it received.
func (u *Upstream) UDPCount() (string, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(u.HTTPURL("/udp"))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
