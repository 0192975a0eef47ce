module stockade.test/nextgo

go 1.21
