// Package api holds the Go code generated from proto/ (make proto): the
// events on NATS, the endpoint registry records in etcd and the gRPC
// services. It is its own module, as etcd's api/v3 is, so that a client of
// Hermod's wire formats depends on them alone.
package api
