// Package area is the maintain-test-break fixture: calc v1.1.0 builds but
// its Double is off by one, which TestPerimeter catches.
package area

import "stockade.test/calc"

// Perimeter returns the perimeter of a w by h rectangle.
func Perimeter(w, h int) int { return calc.Double(w + h) }
