// Package job is the maintain-hang fixture: slow v1.0.1 never returns, so
// the upgraded tree's test runs past the validation's timeout and the
// outcome is validation_inconclusive, never a proposal.
package job

import "stockade.test/slow"

// Run waits for the work.
func Run() { slow.Wait() }
