module stockade.test/repo/maintain-each

go 1.24

require (
	stockade.test/brk v1.0.0
	stockade.test/greet v1.0.1
	stockade.test/nextgo v0.1.0
)
