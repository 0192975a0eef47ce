module stockade.test/repo/maintain-build-break

go 1.24

require (
	stockade.test/brk v1.0.0
)
