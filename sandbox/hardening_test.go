package sandbox

import (
	"reflect"
	"strings"
	"testing"
)

func TestHardeningFromEnv(t *testing.T) {
	uid := func(n int64) *int64 { return &n }
	for _, tt := range []struct {
		name    string
		env     map[string]string
		want    Hardening
		wantErr string
	}{
		{
			name: "defaults",
			want: Hardening{CPUMillis: DefaultCPUMillis, MemoryBytes: defaultMemoryBytes, PidsLimit: DefaultPidsLimit,
				CapDrop: []string{"ALL"}, ReadOnlyRootfs: true, RunAsUser: uid(65534)},
		},
		{
			name: "overrides",
			env: map[string]string{envCPUMillis: "500", envMemoryBytes: "268435456", envPidsLimit: "64",
				envEphemeralStorage: "1048576", envCapDrop: " NET_RAW, cap_sys_admin ,", envReadOnlyRootfs: "false", envRunAsUser: "1000"},
			want: Hardening{CPUMillis: 500, MemoryBytes: 268435456, PidsLimit: 64, EphemeralStorageBytes: 1 << 20,
				CapDrop: []string{"NET_RAW", "cap_sys_admin"}, ReadOnlyRootfs: false, RunAsUser: uid(1000)},
		},
		{name: "bad int", env: map[string]string{envPidsLimit: "many"}, wantErr: "not an integer"},
		{name: "bad bool", env: map[string]string{envReadOnlyRootfs: "maybe"}, wantErr: "not a boolean"},
		{name: "root", env: map[string]string{envRunAsUser: "0"}, wantErr: "root"},
		{name: "tiny memory", env: map[string]string{envMemoryBytes: "1024"}, wantErr: "minimum"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := hardeningFrom(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("hardeningFrom() error = %v; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("hardeningFrom() = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestEffectiveCapDrop(t *testing.T) {
	for _, tt := range []struct {
		capDrop []string
		gated   bool
		want    []string
	}{
		{nil, false, []string{"ALL"}},
		{nil, true, []string{"ALL"}},
		{[]string{}, false, []string{}},
		{[]string{}, true, []string{"NET_ADMIN", "NET_RAW"}},
		{[]string{"cap_net_raw", "NET_RAW", "chown"}, false, []string{"NET_RAW", "CHOWN"}},
		{[]string{"cap_net_raw", "chown"}, true, []string{"NET_RAW", "CHOWN", "NET_ADMIN"}},
		{[]string{"all"}, true, []string{"ALL"}},
	} {
		h := Hardening{CapDrop: tt.capDrop}
		if got := h.EffectiveCapDrop(tt.gated); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Hardening{CapDrop: %q}.EffectiveCapDrop(%v) = %q; want %q", tt.capDrop, tt.gated, got, tt.want)
		}
	}
	// The default list is never aliased.
	h := Hardening{}
	h.EffectiveCapDrop(false)[0] = "X"
	if DefaultCapDrop[0] != "ALL" {
		t.Fatalf("EffectiveCapDrop aliased DefaultCapDrop")
	}
}

func TestHardeningValidate(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	for _, tt := range []struct {
		h       Hardening
		gated   bool
		wantErr string
	}{
		{Hardening{}, false, ""},
		{Hardening{}, true, ""},
		{Hardening{CPUMillis: 1, MemoryBytes: 16 << 20, PidsLimit: 16, ReadOnlyRootfs: true, RunAsUser: n(1)}, true, ""},
		{Hardening{CPUMillis: -1}, false, "negative CPUMillis"},
		{Hardening{MemoryBytes: -1}, false, "negative MemoryBytes"},
		{Hardening{MemoryBytes: 1}, false, "minimum"},
		{Hardening{PidsLimit: -1}, false, "negative PidsLimit"},
		{Hardening{PidsLimit: 3}, false, "minimum"},
		{Hardening{EphemeralStorageBytes: -1}, false, "negative Ephemeral"},
		{Hardening{RunAsUser: n(0)}, false, "root"},
		{Hardening{RunAsUser: n(-5)}, false, "out of range"},
		{Hardening{RunAsUser: n(1 << 40)}, false, "out of range"},
		{Hardening{CapDrop: []string{"NET RAW"}}, false, "invalid capability"},
		{Hardening{CapDrop: []string{""}}, false, "empty capability"},
		{Hardening{PidsLimit: 100}, true, "read-only root"},
		{Hardening{PidsLimit: 100}, false, ""},
	} {
		err := tt.h.Validate(tt.gated)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%+v.Validate(%v) = %v; want %q", tt.h, tt.gated, err, tt.wantErr)
		}
	}
}
