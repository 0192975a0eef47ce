module stockade.test/repo/maintain-newlang

go 1.24

require (
	stockade.test/newlang v1.0.0
)
