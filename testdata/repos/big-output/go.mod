module stockade.test/repo/big-output

go 1.24

require (
	stockade.test/greet v1.0.0
)
