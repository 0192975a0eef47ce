module stockade.test/repo/writes-tree

go 1.24
