// Package chartcheck holds the Helm chart's tests: it renders the chart with
// the pinned helm and validates every object strictly against the
// Kubernetes API types, offline.
package chartcheck
