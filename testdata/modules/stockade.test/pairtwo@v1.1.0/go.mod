module stockade.test/pairtwo

go 1.22
