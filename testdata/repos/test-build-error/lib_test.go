package lib

import "testing"

func TestName(t *testing.T) {
	var n int = Name()
	_ = n
}
