module github.com/stockade/stockade

go 1.26
