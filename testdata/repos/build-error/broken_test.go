package broken

import "testing"

func TestCount(t *testing.T) { _ = Count() }
