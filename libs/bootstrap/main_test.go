package bootstrap

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The parallel subtests of this package are refused connections that
	// wait for their deadline (etcd's 5 s dial timeout, NATS's retries),
	// not for the CPU: let them all wait at once rather than GOMAXPROCS (2
	// on CI) at a time. An explicit -parallel still wins.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", "16"); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
