package calc

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(2, 2); got != 4 {
		t.Errorf("Add(2, 2) = %d; want 4", got)
	}
}

func TestHi(t *testing.T) {
	if Hi() != "hello, calc" {
		t.Error("Hi is wrong")
	}
}

func TestTable(t *testing.T) {
	for _, tt := range []struct{ a, b, want int }{{1, 0, 1}, {1, 1, 2}} {
		t.Run("", func(t *testing.T) {
			if got := Add(tt.a, tt.b); got != tt.want {
				t.Fatalf("Add(%d, %d) = %d; want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}
