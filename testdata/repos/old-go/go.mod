module stockade.test/repo/old-go

go 1.16
