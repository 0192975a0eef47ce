module stockade.test/repo/host-service

go 1.24
