module stockade.test/repo/build-error

go 1.24

require (
	stockade.test/greet v1.0.0
)
