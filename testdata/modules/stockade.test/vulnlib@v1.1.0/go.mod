module stockade.test/vulnlib

go 1.21
