module stockade.test/repo/clean

go 1.24

require (
	stockade.test/greet v1.0.0
	stockade.test/nextgo v0.1.0
)
