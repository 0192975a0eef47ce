module stockade.test/brk

go 1.22
