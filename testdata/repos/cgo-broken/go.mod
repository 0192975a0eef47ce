module stockade.test/repo/cgo-broken

go 1.27
