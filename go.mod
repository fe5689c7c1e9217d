module github.com/tollgate/tollgate

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/corazawaf/libinjection-go v0.3.5
	github.com/redis/rueidis v1.0.79
	github.com/valyala/fasthttp v1.78.0
	go.uber.org/zap v1.28.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/kr/pretty v0.1.0 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/stretchr/testify v1.9.0 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	gopkg.in/check.v1 v1.0.0-20180628173108-788fd7840127 // indirect
)
