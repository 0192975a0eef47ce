module stockade.test/repo/maintain-test-break

go 1.24

require (
	stockade.test/calc v1.0.0
)
