module stockade.test/newlang

go 1.22
