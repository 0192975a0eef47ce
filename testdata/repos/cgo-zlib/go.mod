module stockade.test/repo/cgo-zlib

go 1.26
