module stockade.test/repo/newer-go

go 1.99
