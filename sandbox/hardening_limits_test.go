package sandbox

import (
	"errors"
	"math"
	"testing"
)

// TestHardeningValidateLimits checks the bounds Validate enforces on the
// numeric limits, and that each refusal is ErrInvalidHardening.
func TestHardeningValidateLimits(t *testing.T) {
	for _, tt := range []struct {
		name string
		h    Hardening
		ok   bool
	}{
		{"largest CPUMillis", Hardening{CPUMillis: MaxCPUMillis}, true},
		{"CPUMillis overflowing nano-CPUs", Hardening{CPUMillis: MaxCPUMillis + 1}, false},
		{"CPUMillis max int64", Hardening{CPUMillis: math.MaxInt64}, false},
		{"negative CPUMillis", Hardening{CPUMillis: -1}, false},
		{"tiny memory", Hardening{MemoryBytes: 1}, false},
		{"tiny pids", Hardening{PidsLimit: 1}, false},
		{"negative storage", Hardening{EphemeralStorageBytes: -1}, false},
		{"tiny storage", Hardening{EphemeralStorageBytes: MinEphemeralStorageBytes - 1}, false},
		{"smallest storage", Hardening{EphemeralStorageBytes: MinEphemeralStorageBytes}, true},
	} {
		err := tt.h.Validate(false)
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, ErrInvalidHardening) {
			t.Errorf("%s: %+v.Validate(false) = %v; want ok=%v (refusals match ErrInvalidHardening)", tt.name, tt.h, err, tt.ok)
		}
	}
}
