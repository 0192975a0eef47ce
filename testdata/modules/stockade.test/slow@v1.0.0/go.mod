module stockade.test/slow

go 1.22
