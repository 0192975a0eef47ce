package sandbox

import (
	"errors"
	"testing"
)

func TestStorageBound(t *testing.T) {
	for _, tt := range []struct {
		h    Hardening
		want int64 // -1 for a refusal
	}{
		{Hardening{}, DefaultEphemeralStorageBytes},
		{Hardening{MemoryBytes: 128 << 20}, 64 << 20},
		{Hardening{MemoryBytes: 4 << 30}, DefaultEphemeralStorageBytes},
		{Hardening{EphemeralStorageBytes: 8 << 20}, 8 << 20},
		{Hardening{EphemeralStorageBytes: 1 << 30, MemoryBytes: 4 << 30}, 1 << 30},
		{Hardening{EphemeralStorageBytes: 65 << 20, MemoryBytes: 128 << 20}, -1},
		{Hardening{EphemeralStorageBytes: 1 << 30}, -1},
	} {
		got, err := StorageBound(tt.h)
		if tt.want < 0 && !errors.Is(err, ErrInvalidHardening) || tt.want >= 0 && (err != nil || got != tt.want) {
			t.Errorf("StorageBound(%+v) = %d, %v; want %d (-1: ErrInvalidHardening)", tt.h, got, err, tt.want)
		}
	}
}
