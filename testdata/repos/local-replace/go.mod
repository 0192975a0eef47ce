module stockade.test/repo/local-replace

go 1.24

require stockade.test/greet v1.0.0

replace stockade.test/greet => ../greet-local
