module stockade.test/calc

go 1.22
