module stockade.test/greet/v2

go 1.22
