module sample

go 1.22
