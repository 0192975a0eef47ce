package backend

import (
	"context"
	"slices"
	"sync"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/sandbox"
)

// Restarts serializes the backstop restarts of each sandbox of one
// provider, so that the backend can tell, under the lock, whether a
// restart since its command started already ended it, and two commands
// timing out together restart the sandbox once. The zero value is ready;
// it is safe for concurrent use. Entries stay: only sandboxes that ever
// needed a restart have one.
type Restarts struct {
	locks sync.Map // sandbox ID → *sync.Mutex
}

// Lock locks the restarts of sandbox id (its engine ID or pod UID) and
// returns what unlocks them.
func (r *Restarts) Lock(id string) (unlock func()) {
	mu, _ := r.locks.LoadOrStore(id, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// Owned is the end of every backend's Owned: the session IDs of objects,
// sorted and each once, that session names validly and ours accepts as
// that session's, of this provider.
func Owned[T any](objects []T, session func(T) domain.ID, ours func(T, domain.ID) bool) []domain.ID {
	seen := map[domain.ID]bool{}
	var out []domain.ID
	for _, o := range objects {
		id := session(o)
		if id.Validate() == nil && !seen[id] && ours(o, id) {
			seen[id] = true
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Provision is every backend's Provision: provision, then, only when it
// succeeded, remember spec's GateTokenRevoker in revokers as the one Reap
// uses (a failed Provision, of another policy say, must not replace the
// session's).
func Provision(ctx context.Context, spec sandbox.Spec, revokers *sandbox.Revokers, provision func(context.Context, sandbox.Spec) (sandbox.Sandbox, error)) (sandbox.Sandbox, error) {
	sb, err := provision(ctx, spec)
	if err != nil {
		return nil, err
	}
	revokers.Remember(spec.SessionID, spec.GateTokenRevoker)
	return sb, nil
}
