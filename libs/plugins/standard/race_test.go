//go:build race

package standard_test

const raceEnabled = true
