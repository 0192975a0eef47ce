package container

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestConfigLockedDownByDefault(t *testing.T) {
	cfg, err := Spec{Image: "img"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.HostConfig
	if !h.ReadonlyRootfs || h.Privileged || h.NetworkMode != "none" || !cfg.NetworkDisabled {
		t.Errorf("root/network not locked down: %+v", h)
	}
	if !reflect.DeepEqual(h.CapDrop, []string{"ALL"}) || len(h.CapAdd) != 0 {
		t.Errorf("CapDrop = %v, CapAdd = %v; want [ALL], none", h.CapDrop, h.CapAdd)
	}
	if !reflect.DeepEqual(h.SecurityOpt, []string{"no-new-privileges"}) {
		t.Errorf("SecurityOpt = %v", h.SecurityOpt)
	}
	if cfg.User != NobodyUser {
		t.Errorf("User = %q; want %q", cfg.User, NobodyUser)
	}
	if h.Memory != DefaultMemoryBytes || h.MemorySwap != h.Memory || h.NanoCPUs != DefaultNanoCPUs || h.PidsLimit == nil || *h.PidsLimit != DefaultPidsLimit {
		t.Errorf("limits = mem %d swap %d cpu %d pids %v", h.Memory, h.MemorySwap, h.NanoCPUs, h.PidsLimit)
	}
	if len(cfg.Env) != 0 {
		t.Errorf("Env = %v; want empty", cfg.Env)
	}
}

func TestConfigMountsAndEnv(t *testing.T) {
	s := Spec{
		Image: "img",
		Env:   map[string]string{"B": "2", "A": "1"},
		Mounts: []Mount{
			{Type: Bind, Source: "/src", Target: "/work"},
			{Type: Volume, Source: "vol", Target: "/data", Writable: true},
			{Type: Tmpfs, Target: "/tmp", Exec: true},
		},
		Network: "bridge",
	}
	cfg, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Env, []string{"A=1", "B=2"}) {
		t.Errorf("Env = %v", cfg.Env)
	}
	m := cfg.HostConfig.Mounts
	if len(m) != 2 || !m[0].ReadOnly || m[1].ReadOnly || m[0].BindOptions == nil || m[0].BindOptions.Propagation != "rprivate" {
		t.Errorf("mounts = %+v", m)
	}
	opts := cfg.HostConfig.Tmpfs["/tmp"]
	if !strings.Contains(opts, "exec") || strings.Contains(opts, "noexec") || !strings.Contains(opts, "mode=1777") || !strings.Contains(opts, "nosuid") {
		t.Errorf("tmpfs options = %q", opts)
	}
	if cfg.HostConfig.NetworkMode != "bridge" || cfg.NetworkDisabled {
		t.Errorf("network = %q disabled=%v", cfg.HostConfig.NetworkMode, cfg.NetworkDisabled)
	}
}

func TestConfigRefuses(t *testing.T) {
	for name, s := range map[string]Spec{
		"no image":        {},
		"root user":       {Image: "i", User: "0:0"},
		"root name":       {Image: "i", User: "root"},
		"host network":    {Image: "i", Network: "host"},
		"container net":   {Image: "i", Network: "container:x"},
		"env with =":      {Image: "i", Env: map[string]string{"A=B": "x"}},
		"env with NUL":    {Image: "i", Env: map[string]string{"A\x00": "x"}},
		"value with NUL":  {Image: "i", Env: map[string]string{"A": "x\x00"}},
		"empty env name":  {Image: "i", Env: map[string]string{"": "x"}},
		"relative target": {Image: "i", Mounts: []Mount{{Type: Tmpfs, Target: "tmp"}}},
		"unclean target":  {Image: "i", Mounts: []Mount{{Type: Tmpfs, Target: "/a/../tmp"}}},
		"root target":     {Image: "i", Mounts: []Mount{{Type: Tmpfs, Target: "/"}}},
		"dup target":      {Image: "i", Mounts: []Mount{{Type: Tmpfs, Target: "/t"}, {Type: Tmpfs, Target: "/t"}}},
		"bind no source":  {Image: "i", Mounts: []Mount{{Type: Bind, Target: "/t"}}},
		"relative bind":   {Image: "i", Mounts: []Mount{{Type: Bind, Source: "src", Target: "/t"}}},
		"unknown type":    {Image: "i", Mounts: []Mount{{Type: "nfs", Source: "x", Target: "/t"}}},
		"relative wd":     {Image: "i", Workdir: "work"},
	} {
		if _, err := s.Config(); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%s: Config() err = %v; want ErrInvalidSpec", name, err)
		}
	}
}

func TestClampCPUs(t *testing.T) {
	for _, tc := range []struct {
		nano int64
		ncpu int
		want int64
	}{
		{4e9, 2, 2e9}, {1e9, 2, 1e9}, {5e8, 0, 5e8},
	} {
		if got := ClampCPUs(tc.nano, tc.ncpu); got != tc.want {
			t.Errorf("ClampCPUs(%d, %d) = %d; want %d", tc.nano, tc.ncpu, got, tc.want)
		}
	}
}
