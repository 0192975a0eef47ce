//go:build !unix

package cacheseed

import (
	"context"
	"fmt"
)

const noFollow = 0

func lock(ctx context.Context, name string) (func(), error) {
	return nil, fmt.Errorf("%w: no file locking on this system", ErrUnsupported)
}
