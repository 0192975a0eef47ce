module stockade.test/repo/maintain-hang

go 1.24

require (
	stockade.test/slow v1.0.0
)
