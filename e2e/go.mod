module github.com/hermod/hermod/e2e

go 1.26.0
