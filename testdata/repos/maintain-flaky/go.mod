module stockade.test/repo/maintain-flaky

go 1.24

require (
	stockade.test/greet v1.0.0
)
