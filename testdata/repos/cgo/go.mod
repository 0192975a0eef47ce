module stockade.test/repo/cgo

go 1.27
