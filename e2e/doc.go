// Package e2e holds end-to-end tests: they build Hermod's binaries and run
// them as processes, talking to them the way operators and clients do.
package e2e
