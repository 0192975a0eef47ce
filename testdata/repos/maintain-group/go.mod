module stockade.test/repo/maintain-group

go 1.24

require (
	stockade.test/brk v1.0.0
	stockade.test/greet v1.0.1
	stockade.test/pairone v1.0.0
	stockade.test/pairtwo v1.0.0
)
