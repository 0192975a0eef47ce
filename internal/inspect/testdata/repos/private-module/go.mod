module stockade.test/repo/private-module

go 1.24

require stockade.test/greet v1.0.0
