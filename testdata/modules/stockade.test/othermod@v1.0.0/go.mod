module stockade.test/othermod

go 1.21
