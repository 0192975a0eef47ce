module stockade.test/repo/cgo-missing-header

go 1.27
