module stockade.test/pairone

go 1.22
