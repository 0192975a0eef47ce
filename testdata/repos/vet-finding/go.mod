module stockade.test/repo/vet-finding

go 1.24

require (
	stockade.test/greet v1.0.0
)
