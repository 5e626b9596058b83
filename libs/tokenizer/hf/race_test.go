//go:build race

package hf

const raceEnabled = true
