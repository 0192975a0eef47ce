package domain

import (
	"errors"
	"testing"
)

func TestIDValidate(t *testing.T) {
	for _, tc := range []struct {
		id ID
		ok bool
	}{
		{"s1", true}, {"Session_1.a-b", true}, {"", false}, {"-x", false}, {".x", false},
		{"a/b", false}, {"a b", false}, {"a\x00", false}, {ID(make([]byte, MaxIDLen+1)), false},
	} {
		err := tc.id.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidID)) {
			t.Errorf("ID(%q).Validate() = %v; want ok=%v", tc.id, err, tc.ok)
		}
	}
}

func TestNetworking(t *testing.T) {
	for _, tc := range []struct {
		n  Networking
		ok bool
	}{
		{Networking{}, true},
		{Networking{Type: NetUnrestricted}, true},
		{Networking{Type: NetLimited, AllowedHosts: []string{"proxy.golang.org", "*.example.com"}}, true},
		{Networking{Type: NetLimited, AllowedHosts: []string{"*"}}, false},
		{Networking{Type: NetLimited, AllowedHosts: []string{"a..b"}}, false},
		{Networking{Type: NetLimited, AllowedHosts: []string{"http://x"}}, false},
		{Networking{Type: NetNone, AllowedHosts: []string{"x"}}, false},
		{Networking{Type: "bridge"}, false},
	} {
		err := tc.n.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidNetworking)) {
			t.Errorf("%+v.Validate() = %v; want ok=%v", tc.n, err, tc.ok)
		}
	}
	if !(Networking{}).Equal(Networking{Type: NetNone}) {
		t.Error("zero networking should equal NetNone")
	}
	a := Networking{Type: NetLimited, AllowedHosts: []string{"a.com", "B.com"}}
	b := Networking{Type: NetLimited, AllowedHosts: []string{"b.com", "a.com"}}
	if !a.Equal(b) || a.Equal(Networking{Type: NetLimited, AllowedHosts: []string{"a.com", "a.com"}}) {
		t.Error("Equal ignores order and case only")
	}
}
