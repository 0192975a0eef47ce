module stockade.test/repo/go126

go 1.26
