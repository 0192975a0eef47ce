package area

import "testing"

func TestPerimeter(t *testing.T) {
	if got := Perimeter(2, 3); got != 10 {
		t.Errorf("Perimeter(2, 3) = %d; want 10", got)
	}
}

func TestZero(t *testing.T) {
	if got := Perimeter(0, 0); got > 1 {
		t.Errorf("Perimeter(0, 0) = %d", got)
	}
}
