module stockade.test/repo/maintain-current

go 1.24

require (
	stockade.test/greet v1.1.0
)
