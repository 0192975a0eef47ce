module stockade.test/repo/missing-sum

go 1.24

require stockade.test/greet v1.0.0
