//go:build unix

package cacheseed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// noFollow makes opening a symlink fail instead of following it.
const noFollow = syscall.O_NOFOLLOW

// lockPoll is how often lock retries a held lock.
const lockPoll = 200 * time.Millisecond

// lock takes an exclusive flock on name, waiting until ctx ends. The kernel
// releases it when the process dies, so a crashed build never wedges the
// next one.
func lock(ctx context.Context, name string) (unlock func(), err error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cacheseed: lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("cacheseed: lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("cacheseed: waiting for the seed lock %s: %w", name, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
