module stockade.test/repo/maintain-newer-go

go 1.24

require (
	stockade.test/nextgo v0.1.0
)
