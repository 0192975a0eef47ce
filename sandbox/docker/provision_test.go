package docker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// fixture is one engine test's provider, image and engine client; every
// session it names is reaped at the end, and nothing of its owner may
// remain.
type fixture struct {
	p   *Provider
	c   *dockerapi.Client
	img string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := enginetest.Client(t)
	img := testImage(t, c)
	owner := enginetest.Owner(t)
	p, _ := newProvider(t, owner)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ids, err := p.Owned(ctx)
		if err != nil {
			t.Errorf("Owned() = %v", err)
		}
		for _, id := range ids {
			if err := p.Reap(ctx, id); err != nil {
				t.Errorf("Reap(%s) = %v", id, err)
			}
		}
		if left, err := leftovers(c, owner)(ctx); err != nil || len(left) > 0 {
			t.Errorf("after the test, leftovers = %q, %v; want nothing", left, err)
		}
	})
	return &fixture{p: p, c: c, img: img}
}

func (s *fixture) provision(t *testing.T, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	if spec.Image == "" {
		spec.Image = s.img
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := s.p.Provision(ctx, spec)
	if err != nil {
		t.Fatalf("Provision(%s) = %v", spec.SessionID, err)
	}
	return sb
}

// execIn runs cmd in sb and returns its result; an error fails t.
func execIn(t *testing.T, sb sandbox.Sandbox, cmd string) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 50 * time.Second})
	if err != nil {
		t.Fatalf("Exec(%q) = %v", cmd, err)
	}
	return res
}

// TestProvisionAdoptKeepsContainerUser: re-Provision of a running session
// whose spec asks another uid adopts it (the uid is not part of what must
// match) and runs commands as the container's user, as Attach does.
func TestProvisionAdoptKeepsContainerUser(t *testing.T) {
	s := newFixture(t)
	id := domain.ID("adopt-uid")
	first, second := int64(4242), int64(5151)
	s.provision(t, sandbox.Spec{SessionID: id, Hardening: sandbox.Hardening{RunAsUser: &first, ReadOnlyRootfs: true}})
	again := s.provision(t, sandbox.Spec{SessionID: id, Hardening: sandbox.Hardening{RunAsUser: &second, ReadOnlyRootfs: true}})
	if got := strings.TrimSpace(execIn(t, again, "id -u").Stdout); got != "4242" {
		t.Errorf("after re-Provision asking uid %d, id -u = %q; want the container's 4242", second, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	att, err := s.p.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(execIn(t, att, "id -u").Stdout); got != "4242" {
		t.Errorf("Attach: id -u = %q; want 4242", got)
	}
}
func TestParseUID(t *testing.T) {
	for _, tt := range []struct {
		user string
		want int64
		ok   bool
	}{
		{"4242:4242", 4242, true},
		{"4242", 4242, true},
		{"", 0, false},
		{"nobody", 0, false},
		{"0:0", 0, false},
		{"-1:5", 0, false},
	} {
		got, err := parseUID(tt.user)
		if tt.ok && (err != nil || got != tt.want) || !tt.ok && err == nil {
			t.Errorf("parseUID(%q) = %d, %v; want %d (ok %v)", tt.user, got, err, tt.want, tt.ok)
		}
	}
}
