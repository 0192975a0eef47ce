package sessiongate

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/sandbox"
)

func TestSessionSettings(t *testing.T) {
	n := domain.Networking{Type: domain.NetLimited, AllowedHosts: []string{"B.example", "*.a.example"}}
	priv := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
	st, err := SessionSettings("s1", n, &sandbox.GateSpec{ControlplaneURL: "https://cp.example:443"}, false, priv)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Policy.Allowed; len(got) != 2 || got[0] != "*.a.example" || got[1] != "b.example" || st.Session != "s1" || st.Controlplane != "https://cp.example:443" {
		t.Errorf("settings %+v", st)
	}
	// The digest of a Docker gate is what it was before the settings
	// moved here (a changed digest would make every existing gated
	// session a spec mismatch).
	if d := Digest("img", st, []string{"x.test:10.0.0.1"}, "bridge"); d != "cff9a14239a29ab28601e188" {
		t.Errorf("Digest = %s", d)
	}
	st2 := st
	st2.Listen = "127.0.0.1:3128"
	if Digest("img", st2, nil, "") == Digest("img", st, nil, "") {
		t.Errorf("the listen address is not in the digest")
	}
	for _, g := range []*sandbox.GateSpec{
		{OTelEndpoint: "http://127.0.0.1:4318", OTelInsecure: true},
		{OTelEndpoint: "http://collector.test:4318"},
	} {
		if _, err := SessionSettings("s1", n, g, false, priv); !errors.Is(err, sandbox.ErrInvalidGate) {
			t.Errorf("%+v: %v; want ErrInvalidGate", g, err)
		}
	}
}

func TestConfigChecks(t *testing.T) {
	if _, err := ParsePrivate([]netip.Prefix{{}}); err == nil {
		t.Errorf("ParsePrivate accepted an invalid prefix")
	}
	if p, err := ParsePrivate([]netip.Prefix{netip.MustParsePrefix("10.1.2.3/16")}); err != nil || p[0].String() != "10.1.0.0/16" {
		t.Errorf("ParsePrivate = %v, %v", p, err)
	}
	for _, tc := range []struct {
		h  string
		ok bool
	}{
		{"a.test:10.0.0.1", true},
		{"a.test:::1", true},
		{"a.test", false},
		{"a.test:nope", false},
		{"a..test:10.0.0.1", false},
	} {
		if err := CheckExtraHosts([]string{tc.h}); (err == nil) != tc.ok {
			t.Errorf("CheckExtraHosts(%q) = %v; want ok %v", tc.h, err, tc.ok)
		}
	}
	env := gate.Settings{Listen: "127.0.0.1:3128", Control: "/run/g/control"}.Env()
	st, err := gate.FromEnv(func(k string) string { return env[k] })
	if l, _ := st.ListenOn(nil); err != nil || l != "127.0.0.1:3128" || st.ControlOr() != "/run/g/control" {
		t.Errorf("listen and control do not survive the environment: %+v", st)
	}
}
