module github.com/tollgate/tollgate/tools/testtimes

go 1.26
