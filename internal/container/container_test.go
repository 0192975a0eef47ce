package container

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/defaults"
)

func TestConfigLockedDownByDefault(t *testing.T) {
	cfg, err := Spec{Image: "img", Labels: testLabels}.Config()
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.HostConfig
	if !h.ReadonlyRootfs || h.Privileged || h.NetworkMode != "none" {
		t.Errorf("root/network not locked down: %+v", h)
	}
	// Loopback as on a host: the engine writes /etc/hosts (localhost) only
	// for a namespace it made, and ::1 needs IPv6 on lo.
	if cfg.NetworkDisabled || !reflect.DeepEqual(h.Sysctls, map[string]string{"net.ipv6.conf.lo.disable_ipv6": "0"}) {
		t.Errorf("NetworkDisabled %v, Sysctls %v; want false, IPv6 on lo", cfg.NetworkDisabled, h.Sysctls)
	}
	if !reflect.DeepEqual(h.CapDrop, []string{"ALL"}) || len(h.CapAdd) != 0 {
		t.Errorf("CapDrop = %v, CapAdd = %v; want [ALL], none", h.CapDrop, h.CapAdd)
	}
	if !reflect.DeepEqual(h.SecurityOpt, []string{"no-new-privileges"}) {
		t.Errorf("SecurityOpt = %v", h.SecurityOpt)
	}
	if cfg.User != defaults.NobodyUser {
		t.Errorf("User = %q; want %q", cfg.User, defaults.NobodyUser)
	}
	if h.Memory != defaults.SessionMemoryBytes || h.MemorySwap != h.Memory || h.NanoCPUs != defaults.SessionNanoCPUs || h.PidsLimit == nil || *h.PidsLimit != defaults.SessionPidsLimit {
		t.Errorf("limits = mem %d swap %d cpu %d pids %v", h.Memory, h.MemorySwap, h.NanoCPUs, h.PidsLimit)
	}
	if want := []string{"TERM=dumb", "container=stockade"}; !reflect.DeepEqual(cfg.Env, want) {
		t.Errorf("Env = %v; want %v (defaults.Env only)", cfg.Env, want)
	}
	if !reflect.DeepEqual(h.Ulimits, ulimits()) || len(h.Ulimits) == 0 {
		t.Errorf("Ulimits = %v; want %v", h.Ulimits, ulimits())
	}
}

func TestConfigMountsAndEnv(t *testing.T) {
	s := Spec{
		Image: "img",
		Env:   map[string]string{"B": "2", "A": "1", "TERM": "xterm"},
		Mounts: []Mount{
			{Type: Bind, Source: "/src", Target: "/work"},
			{Type: Volume, Source: "vol", Target: "/data", Writable: true},
			{Type: Tmpfs, Target: "/tmp", Exec: true},
		},
		Network: "bridge",
		Labels:  testLabels,
	}
	cfg, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Env, []string{"A=1", "B=2", "TERM=xterm", "container=stockade"}) {
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
	if cfg.HostConfig.NetworkMode != "bridge" || cfg.NetworkDisabled || cfg.HostConfig.Sysctls != nil {
		t.Errorf("network = %q disabled=%v sysctls=%v", cfg.HostConfig.NetworkMode, cfg.NetworkDisabled, cfg.HostConfig.Sysctls)
	}
}

func TestConfigRefuses(t *testing.T) {
	for name, s := range map[string]Spec{
		"no image":        {Labels: testLabels},
		"no labels":       {Image: "i"},
		"foreign labels":  {Image: "i", Labels: map[string]string{"io.stockade.owner": "x"}},
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

func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		l, def, want Limits
		ncpu         int
	}{
		{Limits{NanoCPUs: 4e9}, SessionLimits(), Limits{2e9, defaults.SessionMemoryBytes, defaults.SessionPidsLimit}, 2},
		{Limits{NanoCPUs: 1e9, PidsLimit: 7}, ToolchainLimits(), Limits{1e9, defaults.ToolchainMemoryBytes, 7}, 2},
		{Limits{}, ToolchainLimits(), ToolchainLimits(), 0},
		{Limits{MemoryBytes: -1}, SessionLimits(), SessionLimits(), 8},
	} {
		if got := tc.l.Or(tc.def).Clamp(tc.ncpu); got != tc.want {
			t.Errorf("%+v.Or(%+v).Clamp(%d) = %+v; want %+v", tc.l, tc.def, tc.ncpu, got, tc.want)
		}
	}
}

func TestToolchainSpec(t *testing.T) {
	sc := Scope{Owner: "o", Run: "r", DataDir: "d"}
	s, err := ToolchainSpec(sc, PurposeProbe, "img", 90*time.Second, []string{"ls"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"io.stockade.managed": "true", "io.stockade.owner": "o", "io.stockade.kind": "toolchain", "io.stockade.run": "r", "io.stockade.datadir": "d", "io.stockade.profile": "probe"}
	if !reflect.DeepEqual(cfg.Labels, want) {
		t.Errorf("labels = %v; want %v", cfg.Labels, want)
	}
	if strings.Join(cfg.Cmd, " ") != "timeout -s KILL 90 ls" || cfg.User != defaults.NobodyUser || *cfg.HostConfig.PidsLimit != defaults.ToolchainPidsLimit {
		t.Errorf("cmd %q user %q pids %d", cfg.Cmd, cfg.User, *cfg.HostConfig.PidsLimit)
	}
	for _, bad := range []Scope{{Run: "r", DataDir: "d"}, {Owner: "o", DataDir: "d"}, {Owner: "o", Run: "r"}} {
		if _, err := ToolchainSpec(bad, PurposeProbe, "img", time.Minute, []string{"ls"}); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("scope %+v: %v; want ErrInvalidSpec", bad, err)
		}
	}
	if _, err := ToolchainSpec(sc, PurposeProbe, "img", 0, []string{"ls"}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("no lifetime: %v; want ErrInvalidSpec", err)
	}
}

func TestSessionSpec(t *testing.T) {
	s := SessionSpec("o", "s1", 1000)
	s.Image = "img"
	cfg, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Labels["io.stockade.session"] != "s1" || cfg.Labels["io.stockade.kind"] != "session" || cfg.User != "1000:1000" || *cfg.HostConfig.PidsLimit != defaults.SessionPidsLimit {
		t.Errorf("labels %v user %q", cfg.Labels, cfg.User)
	}
	// The main process is Stockade's, whatever the image's ENTRYPOINT.
	if len(cfg.Entrypoint) == 0 || cfg.Entrypoint[0] != "/bin/sh" || len(cfg.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q; want Stockade's own sleeping shell as the entrypoint", cfg.Entrypoint, cfg.Cmd)
	}
}

func TestTimeoutCmd(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "timeout -s KILL 1 go test"},
		{1500 * time.Millisecond, "timeout -s KILL 2 go test"},
		{time.Minute, "timeout -s KILL 60 go test"},
	} {
		if got := strings.Join(TimeoutCmd(tt.d, []string{"go", "test"}), " "); got != tt.want {
			t.Errorf("TimeoutCmd(%v) = %q; want %q", tt.d, got, tt.want)
		}
	}
}

var testLabels = map[string]string{"io.stockade.managed": "true", "io.stockade.owner": "test", "io.stockade.kind": "probe"}
