// Package testkit is the root of Hermod's test-support module: real
// servers for tests and the devstack, kept out of the libraries' and the
// services' production code. natsembed and etcdembed embed NATS
// (JetStream) and etcd servers; bustest and coordtest wrap them for tests;
// redistest and mongotest run redis-server and a MongoDB wire-protocol
// server (FerretDB) as child processes; kubeapi runs a real kube-apiserver
// (bin/kube-apiserver) over an embedded etcd.
package testkit
