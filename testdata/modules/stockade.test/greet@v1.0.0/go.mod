module stockade.test/greet

go 1.22
