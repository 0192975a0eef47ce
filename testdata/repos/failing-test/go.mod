module stockade.test/repo/failing-test

go 1.24

require (
	stockade.test/greet v1.0.0
)
