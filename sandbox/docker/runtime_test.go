package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/sandbox"
)

// TestProvisionRefusesMissingRuntime: a runtime the engine does not offer
// (or a name no engine could mean), asked by the Spec or by the provider's
// default, is sandbox.ErrRuntimeUnavailable, and nothing is made: the
// session never runs under the engine's default instead.
func TestProvisionRefusesMissingRuntime(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, rt := range []string{"stockade-no-such-runtime", "bad name", strings.Repeat("r", 65)} {
		id := domain.ID("rt-missing-" + string(rune('a'+i)))
		_, err := f.p.Provision(ctx, sandbox.Spec{SessionID: id, Image: f.img, Runtime: rt})
		if !errors.Is(err, sandbox.ErrRuntimeUnavailable) {
			t.Errorf("Provision(Runtime %q) = %v; want ErrRuntimeUnavailable", rt, err)
		}
	}
	def, err := New(Config{Owner: f.p.owner, Runtime: "stockade-no-such-runtime"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := def.Provision(ctx, sandbox.Spec{SessionID: "rt-missing-default", Image: f.img}); !errors.Is(err, sandbox.ErrRuntimeUnavailable) {
		t.Errorf("Provision() with Config.Runtime missing = %v; want ErrRuntimeUnavailable", err)
	}
	if _, err := New(Config{Runtime: "bad/name"}); err == nil {
		t.Errorf("New(Config{Runtime: %q}) = nil error; want a refusal", "bad/name")
	}
	if ids, err := f.p.Owned(ctx); err != nil || len(ids) > 0 {
		t.Errorf("Owned() = %v, %v after refused Provisions; want nothing made", ids, err)
	}
}
