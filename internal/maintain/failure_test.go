package maintain

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/workflow"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// errInjected is the engine failure failMutate injects.
var errInjected = errors.New("injected: the engine failed")

// failMutate is the real engine, except that creating a mutate container
// fails, as an engine that breaks in the middle of a run would.
type failMutate struct{ *dockerapi.Client }

func (f failMutate) ContainerCreate(ctx context.Context, name string, cfg dockerapi.ContainerConfig) (string, error) {
	if strings.HasPrefix(name, "stockade-tc-mutate-") {
		return "", errInjected
	}
	return f.Client.ContainerCreate(ctx, name, cfg)
}

// TestMaintain_FailureInAttemptIsAnError: Stockade failing inside an
// attempt (here the engine, at go get) is Stockade's failure, an error
// (exit 1), not an attempt whose validation is inconclusive (exit 3).
func TestMaintain_FailureInAttemptIsAnError(t *testing.T) {
	eng, proxy, dataDir := engine(t)
	dir := fixtureRepo(t, "maintain-patch")
	owner := enginetest.Owner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rep, err := Maintain(ctx, failMutate{eng}, Options{Options: workflow.Options{Dir: dir, FixtureProxy: proxy, DataDir: dataDir, LockTimeout: 10 * time.Minute, Owner: owner, Timeout: 5 * time.Minute}})
	if !errors.Is(err, errInjected) || rep != nil {
		t.Fatalf("Maintain = %+v, %v; want no report and the engine's failure", rep, err)
	}
	noContainers(t, eng, owner)
}

// executes is the real engine, counting the execute containers created.
type executes struct {
	*dockerapi.Client
	n int
}

func (e *executes) ContainerCreate(ctx context.Context, name string, cfg dockerapi.ContainerConfig) (string, error) {
	if strings.HasPrefix(name, "stockade-tc-execute-") {
		e.n++
	}
	return e.Client.ContainerCreate(ctx, name, cfg)
}

// TestMaintain_ModulePolicyBeforeTheBaseline: -module path@version is held
// to -allow before anything runs, and a version the proxy does not list
// is refused before the baseline is validated (no execute container).
func TestMaintain_ModulePolicyBeforeTheBaseline(t *testing.T) {
	dir := fixtureRepo(t, "maintain-patch")
	// greet v1.1.0 is a minor upgrade: -allow patch leaves it out.
	_, err := Maintain(context.Background(), nil, Options{Options: workflow.Options{Dir: dir, DataDir: t.TempDir()}, Policy: Policy{Allow: []gomod.Kind{gomod.Patch}, Module: "stockade.test/greet", Version: "v1.1.0"}})
	if !errors.Is(err, ErrPolicy) {
		t.Errorf("Maintain(-allow patch -module greet@v1.1.0) = %v; want ErrPolicy before any engine call", err)
	}

	eng, proxy, dataDir := engine(t)
	counted := &executes{Client: eng}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	owner := enginetest.Owner(t)
	rep, err := Maintain(ctx, counted, Options{Options: workflow.Options{Dir: dir, FixtureProxy: proxy, DataDir: dataDir, LockTimeout: 10 * time.Minute, Owner: owner}, Policy: Policy{Module: "stockade.test/greet", Version: "v1.0.9"}})
	if !errors.Is(err, ErrPolicy) || rep != nil || !strings.Contains(err.Error(), "not a listed release") {
		t.Errorf("Maintain(-module greet@v1.0.9) = %v, %v; want ErrPolicy naming the unlisted version", rep, err)
	}
	if counted.n != 0 {
		t.Errorf("%d execute containers ran before the refusal; want none (no baseline)", counted.n)
	}
	noContainers(t, eng, owner)
}
