package label

import "testing"

func TestHas(t *testing.T) {
	want := map[string]string{Managed: ManagedValue, Owner: "o1", Session: "s1"}
	tests := []struct {
		name string
		have map[string]string
		ok   bool
	}{
		{"all, and more", map[string]string{Managed: ManagedValue, Owner: "o1", Session: "s1", Kind: KindSession}, true},
		{"one differs", map[string]string{Managed: ManagedValue, Owner: "o1", Session: "s2"}, false},
		{"one missing", map[string]string{Managed: ManagedValue, Owner: "o1"}, false},
		{"empty value is not missing", map[string]string{Managed: ManagedValue, Owner: "o1", Session: ""}, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		if got := Has(tt.have, want); got != tt.ok {
			t.Errorf("%s: Has(%v, %v) = %v; want %v", tt.name, tt.have, want, got, tt.ok)
		}
	}
	if !Has(nil, nil) || !Has(map[string]string{Owner: "o1"}, map[string]string{}) {
		t.Errorf("Has(_, empty) = false; want true")
	}
	if !Has(map[string]string{Session: ""}, map[string]string{Session: ""}) || Has(nil, map[string]string{Session: ""}) {
		t.Errorf("Has with an empty wanted value: want it present and empty")
	}
}
