package container_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
)

func TestCheckRuntimeName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"runsc", true},
		{"io.containerd.runc.v2", true},
		{"kata_qemu-1", true},
		{"runsc --debug", false},
		{"../runc", false},
		{"runc\x00", false},
		{strings.Repeat("r", 64), true},
		{strings.Repeat("r", 65), false},
	} {
		err := container.CheckRuntimeName(tc.name)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, container.ErrInvalidSpec) {
			t.Errorf("CheckRuntimeName(%q) = %v; want ok %v (else ErrInvalidSpec)", tc.name, err, tc.ok)
		}
	}
}

// TestRuntimesCheck asks the real engine: its default runtime (runc) is
// there, a made-up one is ErrRuntimeUnavailable, and "" (the default)
// needs no question.
func TestRuntimesCheck(t *testing.T) {
	c := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rts container.Runtimes
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.DefaultRuntime != "" {
		if err := rts.Check(ctx, c, info.DefaultRuntime); err != nil {
			t.Errorf("Check(%q, the engine's default) = %v", info.DefaultRuntime, err)
		}
	}
	if err := rts.Check(ctx, c, ""); err != nil {
		t.Errorf("Check(\"\") = %v", err)
	}
	if err := rts.Check(ctx, c, "stockade-no-such-runtime"); !errors.Is(err, container.ErrRuntimeUnavailable) {
		t.Errorf("Check(a made-up runtime) = %v; want ErrRuntimeUnavailable", err)
	}
}

// TestConfigRuntime: the runtime reaches the engine's HostConfig as named,
// and a malformed name never does.
func TestConfigRuntime(t *testing.T) {
	s := container.Spec{Image: "img", Labels: label.Base("o", label.KindSession), Runtime: container.RuntimeRunsc}
	cfg, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HostConfig.Runtime != container.RuntimeRunsc {
		t.Errorf("HostConfig.Runtime = %q; want %q", cfg.HostConfig.Runtime, container.RuntimeRunsc)
	}
	s.Runtime = "runsc;rm"
	if _, err := s.Config(); !errors.Is(err, container.ErrInvalidSpec) {
		t.Errorf("Config(Runtime %q) = %v; want ErrInvalidSpec", s.Runtime, err)
	}
}

// TestConfigAddress: a fixed address reaches the engine on the spec's
// network; one on "none" or "bridge", or not IPv4, is refused.
func TestConfigAddress(t *testing.T) {
	s := container.Spec{Image: "img", Labels: label.Base("o", label.KindSession), Network: "gn", Address: netip.MustParseAddr("10.0.0.14")}
	cfg, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	if ep := cfg.NetworkingConfig.EndpointsConfig["gn"]; ep == nil || ep.IPAMConfig == nil || ep.IPAMConfig.IPv4Address != "10.0.0.14" {
		t.Errorf("endpoint = %+v; want the fixed address 10.0.0.14", ep)
	}
	for _, bad := range []container.Spec{
		{Image: "img", Labels: s.Labels, Network: "none", Address: s.Address},
		{Image: "img", Labels: s.Labels, Network: "bridge", Address: s.Address},
		{Image: "img", Labels: s.Labels, Network: "gn", Address: netip.MustParseAddr("fd00::1")},
	} {
		if _, err := bad.Config(); !errors.Is(err, container.ErrInvalidSpec) {
			t.Errorf("Config(%s on %q) = %v; want ErrInvalidSpec", bad.Address, bad.Network, err)
		}
	}
}
