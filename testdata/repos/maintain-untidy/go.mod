module stockade.test/repo/maintain-untidy

go 1.24

require (
	stockade.test/brk v1.0.0
	stockade.test/greet v1.0.0
)
