package maintain

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
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
	rep, err := Maintain(ctx, failMutate{eng}, Options{Dir: dir, FixtureProxy: proxy, DataDir: dataDir, LockTimeout: 10 * time.Minute, Owner: owner, Timeout: 5 * time.Minute})
	if !errors.Is(err, errInjected) || rep != nil {
		t.Fatalf("Maintain = %+v, %v; want no report and the engine's failure", rep, err)
	}
	noContainers(t, eng, owner)
}
