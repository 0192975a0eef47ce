package sandbox

import (
	"context"
	"errors"
	"testing"

	"github.com/stockade/stockade/domain"
)

type recRevoker struct {
	name string
	got  *[]string
	err  error
}

func (r recRevoker) Revoke(_ context.Context, id domain.ID) error {
	*r.got = append(*r.got, r.name+":"+string(id))
	return r.err
}

// TestRevokers: a session's own revoker wins, the default covers the
// rest, a forgotten session falls back to the default, and a revoker's
// failure is returned.
func TestRevokers(t *testing.T) {
	var got []string
	boom := errors.New("boom")
	rs := Revokers{Default: recRevoker{"default", &got, nil}}
	rs.Remember("a", recRevoker{"own", &got, nil})
	rs.Remember("b", nil) // no revoker of its own
	rs.Remember("c", recRevoker{"failing", &got, boom})
	ctx := context.Background()
	for _, id := range []domain.ID{"a", "b", "x"} {
		if err := rs.Revoke(ctx, id); err != nil {
			t.Fatalf("Revoke(%s) = %v", id, err)
		}
	}
	if err := rs.Revoke(ctx, "c"); !errors.Is(err, boom) {
		t.Errorf("Revoke(c) = %v; want the revoker's error", err)
	}
	rs.Forget("a")
	if err := rs.Revoke(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	want := []string{"own:a", "default:b", "default:x", "failing:c", "default:a"}
	if len(got) != len(want) {
		t.Fatalf("revoked %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("revoked %v; want %v", got, want)
			break
		}
	}
	var none Revokers
	if err := none.Revoke(ctx, "a"); err != nil {
		t.Errorf("the zero Revokers = %v; want nothing to revoke", err)
	}
}
